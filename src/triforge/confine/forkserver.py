"""Python programs run in fresh children of a confined fork server that has the heavy modules imported.

The server (`forkserver_main.py`) is started once through the launcher and policy of a one-shot run and
forks one child per program; each child gets a one-shot run's rlimits, its own pids and memory cgroup
(the host moves it in before it may go on), the run's deadline and output cap, and its isolation is read
back from /proc before it runs. Servers outlive one command: one per slot under a per-user runtime folder,
one program at a time each, leaving after `TRIFORGE_FORKSERVER_IDLE_S` seconds idle (300); a folder per
policy, interpreter, module set and server code. `TRIFORGE_FORKSERVER=0`: every program runs one-shot.
docs/sandbox.md says what holds and how it is tested.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import astuple
from pathlib import Path

from triforge.confine import isolation as isolation_module
from triforge.confine import proc, unix_socket
from triforge.confine.host import CgroupSet, verify
from triforge.confine.isolation import (
    LAUNCHER,
    PRIVATE_TMP,
    IsolationPolicy,
    interpreter_paths,
    mechanism,
    plan,
    refusal,
    tmp_size_mb,
)
from triforge.confine.run import IsolatedResult, rlimits_spec, scrubbed_env
from triforge.confine.tree import descendants

SERVER = Path(__file__).with_name("forkserver_main.py")
ENV_SWITCH = "TRIFORGE_FORKSERVER"
ENV_IDLE = "TRIFORGE_FORKSERVER_IDLE_S"
ENV_DIR = "TRIFORGE_RUNTIME_DIR"
DEFAULT_IDLE_S = 300.0
START_TIMEOUT_S = 120.0  # the first request waits for the server to import its modules
REPLY_GRACE_S = 10.0  # past the run's deadline, a server that has not answered is taken down


class ForkServerError(RuntimeError):
    """The server broke the protocol or died; the slot's server is stopped and the next call starts another."""


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0" and hasattr(os, "fork") and hasattr(os, "pidfd_open")


def idle_seconds() -> float:
    raw = os.environ.get(ENV_IDLE, "")
    try:
        return max(1.0, float(raw)) if raw else DEFAULT_IDLE_S
    except ValueError:
        return DEFAULT_IDLE_S


def runtime_dir() -> Path | None:
    """The per-user folder for sockets and slots (mode 0700), or None where none can be made safely."""
    raw = os.environ.get(ENV_DIR) or (os.path.join(os.environ["XDG_RUNTIME_DIR"], "triforge")
                                      if os.environ.get("XDG_RUNTIME_DIR") else f"/tmp/triforge-{os.getuid()}")
    path = Path(raw)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    # someone else's folder, or a link planted where ours should be: no server there
    if st.st_uid != os.getuid() or not os.path.isdir(path) or os.path.islink(path) or st.st_mode & 0o077:
        return None
    return path


def _key(policy: IsolationPolicy, preload: Sequence[str]) -> str:
    """What a server was started for: a server is reused only where all of it is the same."""
    parts = [os.path.realpath(sys.executable), sys.version, repr(astuple(policy)), ",".join(preload),
             SERVER.read_text(), LAUNCHER.read_text(), f"tmp {tmp_size_mb()} MiB", *_bound_back(),
             # the code that writes the launcher's spec: what it covers, bounds and mounts
             Path(__file__).read_text(), Path(isolation_module.__file__).read_text()]
    for name in preload:
        spec = importlib.util.find_spec(name.split(".")[0])
        origin = spec.origin if spec is not None and spec.origin else ""
        parts.append(f"{name}:{origin}:{os.stat(origin).st_mtime_ns if origin else 0}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _bound_back() -> list[str]:
    """The interpreter paths the launcher binds back in because they lie under a hidden place (the home, a
    private /tmp): what a server started from this process can read there. Paths elsewhere stay visible
    read-only anyway, so a test runner's longer sys.path does not make a server of its own."""
    hidden = [os.path.realpath(os.path.expanduser("~")), *PRIVATE_TMP]
    return [p for p in interpreter_paths() if any(p == h or p.startswith(h.rstrip("/") + "/") for h in hidden)]


def _python_script(argv: Sequence[str]) -> tuple[list[str], bool] | None:
    """`[python, (-I), SCRIPT, ARGS...]` of this interpreter -> (`[SCRIPT, ARGS...]`, isolated mode)."""
    if len(argv) < 2 or os.path.realpath(argv[0]) != os.path.realpath(sys.executable):
        return None
    isolated = argv[1] == "-I"
    rest = list(argv[2:] if isolated else argv[1:])
    if not rest or rest[0].startswith("-"):
        return None
    return rest, isolated


class _Slot:
    """One server's folder: `lock` (held by the one caller it serves), `sock`, `server.json`, `work/`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.work = folder / "work"
        self.sock = folder / "sock"
        self.meta = folder / "server.json"
        self._lock: int | None = None

    def try_lock(self, block: bool = False) -> bool:
        self.work.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock = fd
        return True

    def release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the last descriptor releases the lock
            self._lock = None

    def connect(self) -> socket.socket | None:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        try:
            unix_socket.connect(conn, self.sock)
        except OSError:
            conn.close()
            return None
        return conn

    def start(self, policy: IsolationPolicy, preload: Sequence[str]) -> None:
        """Start the server through the launcher, as PID 1 of its namespace (no reaper above it: a program
        can neither signal it nor take over a process that holds the listening socket)."""
        self.stop()
        with contextlib.suppress(FileNotFoundError):
            self.sock.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            unix_socket.bind(listener, self.sock)
            listener.listen(8)
            spec_path = self.folder / "spec.json"  # read by the launcher before it covers /tmp
            launch = plan(policy, spec_path, writable=[str(self.work)], one_shot=True)
            # POSIX message queues of the server's IPC namespace, mounted where the server lists them to
            # remove what one program left for the next (forkserver_main._clear_ipc)
            mqueues = MQUEUE_DIR if launch.spec.get("filesystem") else None
            argv = [sys.executable, str(SERVER), str(listener.fileno()), f"{idle_seconds():g}", ",".join(preload),
                    *([mqueues] if mqueues else [])]
            spec = {**launch.spec, "reaper": False, "cgroups": [], "rlimits": rlimits_spec(proc.ProcLimits()),
                    "cwd": str(self.work), "exec_argv": argv, "mqueue_mount": mqueues}
            spec_path.write_text(json.dumps(spec))
            with open(self.folder / "server.log", "ab") as log:
                popen = subprocess.Popen(launch.argv, cwd=self.work, start_new_session=True, env=scrubbed_env(self.work),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                         pass_fds=(listener.fileno(),))
        finally:
            listener.close()
        self.meta.write_text(json.dumps({"group": popen.pid, "mechanism": launch.mechanism.name}))

    def mechanism_name(self) -> str:
        try:
            return str(json.loads(self.meta.read_text())["mechanism"])
        except (OSError, ValueError, KeyError):
            return mechanism().name

    def stop(self) -> None:
        """Take this slot's server down (its launcher's process group, and with it the PID namespace)."""
        try:
            group = int(json.loads(self.meta.read_text())["group"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{group}/cmdline").read_bytes()
            if b"unshare" in cmdline or SERVER.name.encode() in cmdline or b"launcher.py" in cmdline:
                proc.kill_group(group)
        with contextlib.suppress(OSError):
            self.meta.unlink()


def _slots(policy: IsolationPolicy, preload: Sequence[str]) -> list[_Slot] | None:
    base = runtime_dir()
    if base is None:
        return None
    folder = base / f"fs-{_key(policy, preload)}"
    slots = [_Slot(folder / f"s{i}") for i in range(max(2, os.cpu_count() or 1))]
    return slots


def _acquire(slots: list[_Slot]) -> _Slot:
    for slot in slots:
        if slot.try_lock():
            return slot
    slot = slots[os.getpid() % len(slots)]
    slot.try_lock(block=True)
    return slot


def _send(conn: socket.socket, obj: dict, fds: Sequence[int] = ()) -> None:
    data = json.dumps(obj).encode()
    msg = struct.pack("!I", len(data)) + data
    if fds:
        sent = socket.send_fds(conn, [msg], list(fds))
        conn.sendall(msg[sent:])
    else:
        conn.sendall(msg)


def _recv(conn: socket.socket) -> tuple[dict, int | None]:
    """One message, and the host pid of the process that sent its first bytes (from its credentials)."""
    pid = None
    head = b""
    while len(head) < 4:
        data, anc, _, _ = conn.recvmsg(4 - len(head), socket.CMSG_SPACE(12))
        if not data:
            raise ForkServerError("the fork server hung up")
        for level, kind, cred in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and pid is None:
                pid = struct.unpack("3i", cred[:12])[0]
        head += data
    size = struct.unpack("!I", head)[0]
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ForkServerError("the fork server hung up")
        body += chunk
    return json.loads(body), pid


def _map_paths(args: list[str], workdir: Path, run: Path) -> list[str]:
    prefix = str(workdir) + os.sep
    return [str(run / a[len(prefix):]) if a.startswith(prefix) else a for a in args]


def run_forked(
    argv: Sequence[str],
    *,
    workdir: str | Path,
    timeout: float | None,
    policy: IsolationPolicy | None = None,
    limits: proc.ProcLimits | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    output_limit: int = proc.DEFAULT_OUTPUT_LIMIT,
    nice: int = 0,
    preload: Sequence[str] = (),
) -> IsolatedResult | None:
    """Run `python [-I] SCRIPT ARGS...` (this interpreter) as `run_isolated` would, in a warm child.

    `workdir`'s files are copied into the run's own folder and back after the run (paths in `argv`
    under `workdir` are mapped); `env` defaults to `scrubbed_env` of that folder. Returns None where a
    fork server cannot serve this run (turned off, another interpreter, isolation off, no runtime
    folder): the caller then runs it one-shot.
    """
    policy = policy or IsolationPolicy.from_env()
    script = _python_script(argv)
    if not enabled() or script is None or not policy.enabled:
        return None
    slots = _slots(policy, preload)
    if slots is None:
        return None
    slot = _acquire(slots)
    try:
        return _run_in(slot, script, workdir=Path(workdir).resolve(), timeout=timeout, policy=policy,
                       limits=limits or proc.ProcLimits(), env=env, input=input, output_limit=output_limit,
                       nice=nice, preload=preload, argv=list(argv))
    finally:
        slot.release()


MQUEUE_DIR = "/dev/shm/.mqueue"  # inside the server's private /dev/shm; handed to forkserver_main as argv[4]


def _begin(slot: _Slot, req: dict, fds: list[int], policy: IsolationPolicy, preload: Sequence[str]
           ) -> tuple[socket.socket, int]:
    """Hand the request to the slot's server (started if there is none); the connection and the host pid of
    the child it forked. A server that went away between runs (idle, killed) is replaced once."""
    for attempt in (1, 2):
        conn = slot.connect()
        if conn is None:
            slot.start(policy, preload)
            conn = slot.connect()
            if conn is None:
                raise ForkServerError("the fork server did not start (see its server.log)")
        try:
            conn.settimeout(START_TIMEOUT_S)
            _send(conn, req, fds)
            started, child = _recv(conn)
            if not started.get("started") or not child:
                raise ForkServerError(f"unexpected reply {started}")
            return conn, child
        except (OSError, ForkServerError):
            conn.close()
            slot.stop()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _run_in(slot: _Slot, script: tuple[list[str], bool], *, workdir: Path, timeout: float | None,
            policy: IsolationPolicy, limits: proc.ProcLimits, env: Mapping[str, str] | None, input: str | None,
            output_limit: int, nice: int, preload: Sequence[str], argv: list[str]) -> IsolatedResult:
    run = slot.work / f"run-{uuid.uuid4().hex[:12]}"
    shutil.copytree(workdir, run, symlinks=True)
    cgroups = CgroupSet(limits.max_processes, limits.memory_mb)
    pipes = [os.pipe() for _ in range(3)]
    theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
    ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
    conn: socket.socket | None = None
    ok = False
    try:
        args, isolated = script
        req = {"argv": _map_paths(args, workdir, run), "isolated_mode": isolated, "cwd": str(run),
               "env": dict(env) if env is not None else scrubbed_env(run), "rlimits": rlimits_spec(limits),
               "nice": nice, "timeout": timeout}
        conn, child = _begin(slot, req, theirs, policy, preload)
        for fd in theirs:
            os.close(fd)
        theirs = []
        ours = []
        out = proc._Capped(os.fdopen(pipes[1][0], "rb"), output_limit)
        err = proc._Capped(os.fdopen(pipes[2][0], "rb"), output_limit)
        _feed(pipes[0][1], input)
        t0 = time.perf_counter()
        for path in cgroups.dirs.values():
            (path / "cgroup.procs").write_text(str(child))
        iso = verify(child, cgroups, None, slot.mechanism_name())
        if gaps := iso.gaps(policy.network, not policy.hide_home):
            proc.kill_group(child)
            raise refusal(f"the fork server's child started, but {', '.join(gaps)}")
        watch = proc.watches(lambda: descendants(child) | {child},
                             tree_memory_mb=None if "memory" in cgroups.dirs else limits.memory_mb,
                             folder=((run, *policy.writable), limits.folder_mb) if limits.folder_mb else None)
        conn.sendall(b"g")
        stopped = _watched(conn, child, watch, None if timeout is None else t0 + timeout + REPLY_GRACE_S)
        conn.settimeout(None if timeout is None else timeout + REPLY_GRACE_S)
        try:
            done, _ = _recv(conn)
        except (TimeoutError, ForkServerError):
            proc.kill_group(child)
            raise
        duration = time.perf_counter() - t0
        cgroups.kill_all()  # the server killed what the program left; the cgroup says so too
        stdout, st = out.text(2.0)
        stderr, et = err.text(2.0)
        for name in os.listdir(run):  # what the program wrote where a one-shot run would have left it
            src = run / name
            if src.is_file() and not src.is_symlink():
                shutil.copyfile(src, workdir / name)
        ok = True
        stderr = proc.with_stop_note(stderr, stopped)
        res = proc.ProcResult(list(argv), done.get("returncode"), stdout, stderr, duration,
                              bool(done.get("timed_out")), st, et)
        return IsolatedResult(res, iso.confinement(), policy)
    finally:
        for fd in theirs + ours:
            os.close(fd)
        if conn is not None:
            conn.close()
        cgroups.destroy()
        shutil.rmtree(run, ignore_errors=True)
        if not ok:
            slot.stop()


def _watched(conn: socket.socket, child: int, watch: proc.Watch | None, until: float | None) -> str | None:
    """Until the server replies, `watch` every 0.1 s; when it gives a reason, the program's group is killed (the
    server then empties the namespace and replies) and the reason returned."""
    if watch is None:
        return None
    while not select.select([conn], [], [], proc.WATCH_PERIOD_S)[0]:
        if until is not None and time.perf_counter() >= until:
            return None
        if (reason := watch()) is not None:
            proc.kill_group(child)
            return reason
    return None


def _feed(fd: int, text: str | None) -> None:
    def feed() -> None:
        with contextlib.suppress(OSError), os.fdopen(fd, "wb") as f:
            if text:
                f.write(text.encode())

    if text is None:
        os.close(fd)
    else:
        threading.Thread(target=feed, daemon=True).start()


def run_confined(argv: Sequence[str], *, workdir: str | Path, timeout: float | None,
                 policy: IsolationPolicy | None = None, limits: proc.ProcLimits | None = None,
                 input: str | None = None, output_limit: int = proc.DEFAULT_OUTPUT_LIMIT, nice: int = 0,
                 preload: Sequence[str] = ()) -> IsolatedResult:
    """`run_forked` where a fork server can take the run, else `run.run_isolated` (one-shot)."""
    from triforge.confine.run import run_isolated

    res = run_forked(argv, workdir=workdir, timeout=timeout, policy=policy, limits=limits, input=input,
                     output_limit=output_limit, nice=nice, preload=preload)
    if res is not None:
        return res
    return run_isolated(argv, workdir=workdir, timeout=timeout, policy=policy, limits=limits, input=input,
                        output_limit=output_limit)


def stop_all(base: Path | None = None) -> int:
    """Stop every fork server under the runtime folder (tests, `--isolation` changes); how many were asked."""
    base = base or runtime_dir()
    if base is None:
        return 0
    n = 0
    for meta in base.glob("fs-*/s*/server.json"):
        _Slot(meta.parent).stop()
        n += 1
    return n

