"""The fork server's own side: runs inside the isolation, imports the heavy modules once, forks per program.

    python forkserver_main.py LISTEN_FD IDLE_S MODULE[,MODULE...] [MQUEUE_DIR]

Started by `triforge.confine.forkserver` through the launcher (so under the same namespaces, mounts,
dropped capabilities and seccomp filter as a one-shot run), as PID 1 of its PID namespace: no program
can signal it, and orphans come back to it; it imports nothing from triforge. It accepts
connections on the listening socket it inherited (bound by the host, at a path no program inside can
see), and only from outside its own PID namespace (peer pid 0 there): a program it runs cannot ask it
for anything. One program at a time: for each request it forks a child that reports itself (the host
reads its pid from the message's credentials and puts it into the run's cgroups), waits for `go`,
lowers its rlimits, takes the stdin/stdout/stderr pipes the host sent, and runs the script as
`__main__`. When the child ends (or its deadline passes, or the host hangs up), every other process of
the namespace is killed and the private temporary folders and SysV IPC objects are cleared before the reply, so nothing of
one program is left for the next. The server leaves after IDLE_S seconds without a request.
"""

import json
import os
import select
import signal
import socket
import struct
import sys
import time

# The script's own folder (triforge/confine) must not shadow modules such as `trace` or `select`.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")
_PR_SET_DUMPABLE = 4
_MAX_REQUEST = 4 << 20


def _prctl(option: int, value: int) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """One request: a 4-byte length, then that much JSON; its first chunk carries the three fds."""
    head, fds, _, _ = socket.recv_fds(conn, 4, 3)
    if len(head) < 4:
        raise ValueError("short request")
    size = struct.unpack("!I", head[:4])[0]
    if size > _MAX_REQUEST:
        raise ValueError("request too large")
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ValueError("truncated request")
        body += chunk
    return json.loads(body), list(fds)


def _send(conn: socket.socket, obj: dict) -> None:
    data = json.dumps(obj).encode()
    conn.sendall(struct.pack("!I", len(data)) + data)


def _set_rlimits(limits: dict) -> None:
    import resource

    for name, (soft, hard) in limits.items():
        res = getattr(resource, name)
        cap = resource.getrlimit(res)[1]
        if cap != resource.RLIM_INFINITY:
            soft, hard = min(soft, cap), min(hard, cap)
        resource.setrlimit(res, (soft, hard))


def _run_script(req: dict) -> int:
    """Become `python [-I] SCRIPT ARGS...` as far as the program can tell; return its exit status."""
    import atexit
    import traceback
    import types

    script = req["argv"][0]
    sys.argv = list(req["argv"])
    if not req.get("isolated_mode"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    main = types.ModuleType("__main__")
    main.__file__ = script
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    code = 0
    try:
        with open(script, "rb") as f:
            source = f.read()
        exec(compile(source, script, "exec"), main.__dict__)
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:  # noqa: BLE001 - what an interpreter prints for an uncaught exception
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None  # drop this frame
        traceback.print_exception(type(exc), exc, tb)
        code = 1
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as the interpreter does when it cannot flush at exit
    return code


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _child(req: dict, fds: list[int], conn: socket.socket, listener: socket.socket) -> None:
    code = 1
    try:
        os.setpgid(0, 0)
        listener.close()
        _send(conn, {"started": True})  # the host reads this process's pid from the credentials
        if conn.recv(1) != b"g":
            os._exit(1)
        conn.close()
        if req.get("nice"):
            os.nice(int(req["nice"]))
        _set_rlimits(req.get("rlimits", {}))
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req.get("env", {}))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)
        sys.stdin = open(0, encoding="utf-8", errors="strict", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                          closefd=False)
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter sets it at start
        _reseed()
        code = _run_script(req)
    except BaseException:  # noqa: BLE001 - report, then leave without unwinding into the server's loop
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _reseed() -> None:
    """A fresh program draws fresh random numbers: the generators imported before the fork are reseeded
    (`random` reseeds itself at fork)."""
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        np_random.seed()


def _others() -> list[int]:
    me = os.getpid()
    return [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) not in (1, me)]


def _kill_others() -> None:
    """Kill every process of the namespace but this server (its PID 1), until none is left."""
    for _ in range(200):
        left = _others()
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap()
        time.sleep(0.002)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _tmpfs_skeleton() -> dict[str, tuple[int, set[str]]]:
    """Each private temporary folder's device and the directories on it at start: the launcher's paths
    down to what it bound back in (the server's own work folder may lie below /tmp)."""
    out = {}
    for top in PRIVATE_TMP:
        try:
            dev = os.lstat(top).st_dev
        except OSError:
            continue
        dirs = {top}
        for root, names, _ in os.walk(top):
            names[:] = [n for n in names if os.lstat(os.path.join(root, n)).st_dev == dev]
            dirs.update(os.path.join(root, n) for n in names)
        out[top] = (dev, dirs)
    return out


def _sweep(path: str, dev: int, keep: set[str]) -> None:
    """Remove what a program left on the private tmpfs at `path`; never below another mount (a bound
    work folder), never the directories that were there at start."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_dev != dev:  # a mount point: a path bound back in from the host
            continue
        if entry.is_dir(follow_symlinks=False):
            _sweep(entry.path, dev, keep)
            if entry.path not in keep:
                try:
                    os.rmdir(entry.path)
                except OSError:
                    pass
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


_MQUEUES: list[str] = []  # where the launcher mounted this namespace's POSIX message queues (argv[4]), if it did


def _clear_ipc() -> None:
    """Remove every SysV shared memory segment, semaphore set and message queue, and every POSIX message
    queue, of this IPC namespace (the server's own: programs share it): one program's would outlive it,
    readable by the next by its key or name."""
    import contextlib
    import ctypes

    for folder in _MQUEUES:
        with contextlib.suppress(OSError):
            for name in os.listdir(folder):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    removers = {"shm": lambda i: libc.shmctl(i, ipc_rmid, None), "sem": lambda i: libc.semctl(i, 0, ipc_rmid),
                "msg": lambda i: libc.msgctl(i, ipc_rmid, None)}
    for kind, remove in removers.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 1 and cols[1].lstrip("-").isdigit():
                remove(int(cols[1]))


def _clear_work(current: str) -> None:
    """Empty the server's work folder but for the run that just ended (its host copies its files out)."""
    import shutil

    work = os.getcwd()
    for name in os.listdir(work):
        path = os.path.join(work, name)
        if path == current:
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def _status(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


_SKELETON: dict[str, tuple[int, set[str]]] = {}


def _serve_one(conn: socket.socket, listener: socket.socket) -> None:
    req, fds = _recv_request(conn)
    if len(fds) != 3:
        raise ValueError("a request carries stdin, stdout and stderr")
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(req, fds, conn, listener)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    deadline = t0 + float(req["timeout"]) if req.get("timeout") else None
    timed_out, status = False, None
    try:
        while status is None:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([pidfd, conn], [], [], wait)
            if pidfd in ready:
                status = os.waitpid(pid, 0)[1]
                break
            if conn in ready:  # the host hung up, or sent `go` already read by the child: check
                try:
                    data = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                except BlockingIOError:
                    data = b"?"
                if not data:
                    break
            if deadline is not None and time.monotonic() >= deadline:
                timed_out = True
                break
    finally:
        os.close(pidfd)
        if status is None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            status = os.waitpid(pid, 0)[1]
        _kill_others()
        for top, (dev, keep) in _SKELETON.items():
            _sweep(top, dev, keep)
        _clear_ipc()
        _clear_work(req["cwd"])
    try:
        _send(conn, {"returncode": None if timed_out else _status(status), "timed_out": timed_out,
                     "seconds": time.monotonic() - t0})
    except OSError:
        pass


def main() -> None:
    listen_fd, idle_s, modules = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    _MQUEUES.extend(sys.argv[4:5])
    listener = socket.socket(fileno=listen_fd)
    os.set_inheritable(listen_fd, False)
    _prctl(_PR_SET_DUMPABLE, 0)  # programs of this uid may not open this process's memory through /proc
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    for name in filter(None, modules.split(",")):
        __import__(name)
    _SKELETON.update(_tmpfs_skeleton())
    while True:
        ready, _, _ = select.select([listener], [], [], idle_s)
        if not ready:
            return
        conn, _ = listener.accept()
        try:
            pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
            if pid != 0:  # a process inside this namespace: one of the programs
                continue
            _serve_one(conn, listener)
        except (OSError, ValueError) as exc:  # one broken request: logged (the host's server.log), not fatal
            print(f"forkserver: request failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        finally:
            conn.close()


if __name__ == "__main__":
    main()
