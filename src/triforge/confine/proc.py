"""Subprocesses with deadlines: own process group, killed whole on timeout, output capped.

Whole means whole: besides the process group, every process that carries the run's tag in its
environment (inherited by all descendants, also those that left the group with `setsid`) and every
descendant still attached to the tree is killed when the run ends. Optional rlimits are applied
by `prlimit(1)` before the program starts.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triforge.confine.tree import (
    descendants,
    folder_mb,
    held_deleted,
    memfd_maps,
    memfd_mb,
    memfd_open,
    memory_mb,
    outermost,
)

DEFAULT_OUTPUT_LIMIT = 64_000
TAG_VAR = "TRIFORGE_PROC_TAG"


@dataclass(frozen=True)
class ProcLimits:
    """rlimits for one run. `max_processes` (RLIMIT_NPROC) counts per user and does not bind root."""

    memory_mb: int | None = None  # RLIMIT_AS
    cpu_seconds: int | None = None  # RLIMIT_CPU
    max_file_mb: int | None = None  # RLIMIT_FSIZE
    max_processes: int | None = None  # RLIMIT_NPROC
    core_dumps: bool = False
    open_files: int | None = None  # RLIMIT_NOFILE
    folder_mb: int | None = 2048  # what the working folder may grow by during the run (measured every 0.1 s)

    def prlimit_args(self) -> list[str]:
        args = [] if self.core_dumps else ["--core=0"]
        if self.memory_mb:
            args.append(f"--as={self.memory_mb << 20}")
        if self.cpu_seconds:
            args.append(f"--cpu={self.cpu_seconds}")
        if self.max_file_mb:
            args.append(f"--fsize={self.max_file_mb << 20}")
        if self.max_processes:
            args.append(f"--nproc={self.max_processes}")
        if self.open_files:
            args.append(f"--nofile={self.open_files}")
        return args


@dataclass
class ProcResult:
    cmd: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class _Capped:
    """Reads a pipe to the end, keeping the first and last bytes within a bound."""

    def __init__(self, stream, limit: int) -> None:
        self.limit = max(limit, 0) or 1 << 62
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream) -> None:
        half = self.limit // 2
        try:
            for chunk in iter(lambda: stream.read(65536), b""):
                self.total += len(chunk)
                room = self.limit - half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    if len(self.tail) > half:
                        del self.tail[: len(self.tail) - half]
        except (OSError, ValueError):
            pass

    def text(self, wait: float) -> tuple[str, bool]:
        self._thread.join(wait)
        kept = len(self.head) + len(self.tail)
        if self.total <= kept:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace"), False
        cut = self.total - kept
        body = (
            bytes(self.head).decode("utf-8", "replace")
            + f"\n[... {cut} bytes cut ...]\n"
            + bytes(self.tail).decode("utf-8", "replace")
        )
        return body, True


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _proc_table() -> dict[int, int]:
    """pid -> parent pid for every process visible in /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: fields resume after the last ')'
        table[int(name)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    return table


def _tagged(tag: str) -> set[int]:
    needle = f"{TAG_VAR}={tag}".encode()
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.add(int(name))
        except OSError:
            continue
    return found


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in _proc_table().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kill_tree(pid: int, tag: str | None = None, exited: bool = False) -> int:
    """Kill `pid`'s group, its descendants and every process carrying `tag`; return how many were hit.

    `exited`: `pid` has already been reaped, so it has no descendants left to walk.
    """
    me = os.getpid()
    targets = set() if exited else _descendants(pid)
    if tag:
        targets |= _tagged(tag)
    targets.discard(me)
    kill_group(pid)
    if not targets:
        return 0
    hit = 0
    for _ in range(5):  # a process may fork while it is being killed
        for target in targets:
            try:
                os.kill(target, signal.SIGKILL)
                hit += 1
            except (ProcessLookupError, PermissionError):
                pass
        if not tag:
            break
        targets = _tagged(tag) - {me}
        if not targets:
            break
        time.sleep(0.002)
    return hit


class Stopped(Exception):
    """A watch stopped the program (its tree's memory, its working folder's size): the reason, for stderr."""


WATCH_PERIOD_S = 0.1
Watch = Callable[[], "str | None"]  # a reason to stop the program now, or None


Folders = tuple["str | os.PathLike[str] | Sequence[str | os.PathLike[str]]", int]


class _Every:
    """The last value of `read(*args)`, read again once `factor` times its last reading has passed (or when
    `fresh`): a costly measurement then takes a bounded share of a core (1/factor), however large it grows."""

    def __init__(self, read: Callable[..., Any], factor: float) -> None:
        self.read, self.factor, self.due, self.value = read, factor, 0.0, None

    def __call__(self, *args: Any, fresh: bool = False) -> Any:
        if fresh or time.monotonic() >= self.due:
            t0 = time.monotonic()
            self.value = self.read(*args)
            self.due = t0 + self.factor * (time.monotonic() - t0)
        return self.value


def watches(pids: Callable[[], set[int]], *, tree_memory_mb: int | None = None,
            folder: Folders | None = None, holders: Callable[[], set[int]] | None = None,
            since: dict[str, float] | None = None) -> Watch | None:
    """What is measured every 0.1 s while a program runs: the memory of its tree (`pids()`) where no memory
    cgroup holds it, with what its processes hold in memfd files, and how much its writable folders grew
    together (`folder`: its working folder, or a sequence of every folder it may write, the working folder
    first; and the MiB they may grow by). Files deleted there but still held open or mapped by the processes
    of `holders()` (default `pids()`) count too: the disk they take is no longer in any folder. `since`: a
    folder's size to count growth from (a kernel's working folder from its first cell, so that growth adds up
    over cells), by its real path."""
    holders = holders or pids
    start: dict[str, float] = {}
    roots: list[str] = []
    if folder is not None:
        roots = outermost([folder[0]] if isinstance(folder[0], (str, os.PathLike)) else folder[0])
        for p in roots:  # a folder too large to measure every 0.1 s from the start is not watched
            if (mb := since[p] if since and p in since else folder_mb(p)) != float("inf"):
                start[p] = mb
    # a large shared folder (a compile cache) is measured once 20 times its measuring has passed; deleted files
    # held through a mapping, and memfd mappings, once 100 times (reading a kernel's /proc maps takes 2.5 ms)
    sizes = {p: _Every(folder_mb, 20) for p in start}
    held_mapped = _Every(lambda held: held_deleted(held, list(start), opened=False), 100)
    memfd_mapped = _Every(memfd_maps, 100)
    memfd_last: dict[int, int] = {}

    def grown(held: set[int]) -> float:
        deleted = {**held_mapped(held), **held_deleted(held, list(start), mapped=False)}  # none were in a folder
        return sum(sizes[p](p) - mb for p, mb in start.items()) + sum(deleted.values()) / (1 << 20)

    def in_memfds(held: set[int]) -> float:
        # the mappings are read again whenever the open memfds changed: a page just touched is in the PSS and
        # in the blocks, and both must be fresh to count it once
        nonlocal memfd_last
        opened = memfd_open(held)
        maps = memfd_mapped(held, fresh=opened != memfd_last)
        memfd_last = opened
        return memfd_mb(opened, maps)

    def check() -> str | None:
        held = holders()
        if tree_memory_mb is not None and memory_mb(pids()) + in_memfds(held) > tree_memory_mb:
            return (f"the program and the processes it started went past {tree_memory_mb} MiB together (the memory "
                    "limit, measured every 0.1 s where no memory cgroup holds it)")
        if start and folder is not None and (more := grown(held)) > folder[1]:
            if len(roots) == 1:
                what = "holds too many files" if more == float("inf") else f"grew by more than {folder[1]} MiB"
                return f"its working folder {what} (the folder limit, measured every 0.1 s)"
            what = "hold too many files" if more == float("inf") else f"grew by more than {folder[1]} MiB together"
            return (f"its working folder and the other folders it may write ({', '.join(start)}) {what} (the "
                    "folder limit, measured every 0.1 s)")
        return None

    return check if tree_memory_mb is not None or start else None


def with_stop_note(stderr: str, reason: str | None) -> str:
    """The program's stderr, with a last line saying why triforge killed it (when a watch did)."""
    return f"{stderr.rstrip()}\ntriforge: killed: {reason}\n".lstrip() if reason else stderr


def _wait(proc: subprocess.Popen, timeout: float | None, watch: Watch | None = None) -> None:
    """`proc.wait(timeout)` without its polling (sleeps of up to 50 ms): woken by a pidfd when the program ends.
    With `watch`, it is asked every 0.1 s on the way (`Stopped` with its reason when it gives one)."""
    if timeout is None and watch is None:
        proc.wait()
        return
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = None
    poller = select.poll()
    if fd is not None:
        poller.register(fd, select.POLLIN)
    deadline = None if timeout is None else time.monotonic() + max(timeout, 0)
    try:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = left if watch is None else min(WATCH_PERIOD_S, WATCH_PERIOD_S if left is None else left)
            if fd is None:
                try:
                    proc.wait(timeout=step)
                    break
                except subprocess.TimeoutExpired:
                    pass
            elif poller.poll(None if step is None else step * 1000):
                break
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout or 0)
            if watch is not None and (reason := watch()) is not None:
                raise Stopped(reason)
    finally:
        if fd is not None:
            os.close(fd)
    proc.wait()


def run(
    cmd: Sequence[str],
    *,
    timeout: float | None = 60.0,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    preexec_fn=None,
    limits: ProcLimits | None = None,
    reap_escaped: bool = True,
    tree_memory_mb: int | None = None,
    folder: tuple[str | os.PathLike[str], int] | None = None,
) -> ProcResult:
    """Run `cmd` in its own process group; when it ends or times out, kill everything it started.

    Never raises for a failing or hanging program; a command that cannot be started at all
    (missing executable) raises `FileNotFoundError` as usual. With `reap_escaped`, processes
    that left the group (setsid, daemons) are found by a tag in their environment and killed too.
    `tree_memory_mb`: the memory the program and its children may use together, measured every 0.1 s (where
    no memory cgroup bounds them: RLIMIT_AS holds each process alone); `folder`: a folder and the MiB it may
    grow by. Past either the tree is killed and stderr says why.
    """
    argv = list(cmd)
    if limits is not None:
        exe = shutil.which("prlimit")
        if exe is None:
            raise FileNotFoundError("prlimit (util-linux) is needed to apply ProcLimits")
        local = os.path.join(str(cwd or "."), argv[0])
        if shutil.which(argv[0], path=(env or os.environ).get("PATH")) is None and not os.path.exists(local):
            raise FileNotFoundError(f"no such program: {argv[0]}")
        argv = [exe, *limits.prlimit_args(), "--", *argv]
    full_env = dict(env) if env is not None else dict(os.environ)
    tag = uuid.uuid4().hex if reap_escaped else None
    if tag:
        full_env[TAG_VAR] = tag
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=str(cwd) if cwd is not None else None,
        env=full_env,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        process_group=0,  # its own group; unlike start_new_session this keeps the fast vfork path
        preexec_fn=preexec_fn,
    )
    out = _Capped(proc.stdout, output_limit)
    err = _Capped(proc.stderr, output_limit)
    if input is not None:
        def feed() -> None:
            try:
                proc.stdin.write(input.encode())
                proc.stdin.close()
            except OSError:
                pass

        threading.Thread(target=feed, daemon=True).start()
    timed_out, stopped = False, None
    watch = watches(lambda: descendants(proc.pid) | {proc.pid}, tree_memory_mb=tree_memory_mb, folder=folder)
    try:
        _wait(proc, timeout, watch)
    except subprocess.TimeoutExpired:
        timed_out = True
    except Stopped as e:
        stopped = str(e)
    finally:
        # Kill the whole tree even on success: a program may leave background children behind.
        kill_tree(proc.pid, tag, exited=proc.poll() is not None)
        proc.wait()
    stdout, st = out.text(2.0)
    stderr, et = err.text(2.0)
    for s in (proc.stdout, proc.stderr):
        s.close()
    stderr = with_stop_note(stderr, stopped)
    return ProcResult(
        cmd=list(cmd),
        returncode=None if timed_out else proc.returncode,
        stdout=stdout,
        stderr=stderr,
        duration_s=time.perf_counter() - t0,
        timed_out=timed_out,
        stdout_truncated=st,
        stderr_truncated=et,
    )
