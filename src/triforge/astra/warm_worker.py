"""A lab worker that outlives one command: `astra check` pays the worker's start (torch, the CUDA context,
the baseline's compile) once, and later checks find it warm.

The first check starts a small server process (`python -m triforge.astra.warm_worker`, its own session)
that holds one `Worker`, confined exactly as in a one-shot check, and listens on a Unix socket in the
user's runtime directory (`$XDG_RUNTIME_DIR/triforge-astra/`, else `/tmp/triforge-astra-<uid>/`; the
folder must be the user's own and closed to others), one per GPU selection (`CUDA_VISIBLE_DEVICES`).
Later commands connect to it; it answers only its own user (the peer's uid, from SO_PEERCRED), one
request at a time, and leaves after `IDLE_S` seconds without one. A server started from other code or
other settings (the package's files, the isolation switch, the NVRTC cache, the interpreter) is
replaced: the client compares a stamp of these on every connection. The pidfile beside the socket
names the server for `astra stop-worker`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import struct
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from triforge.astra import worker_wire
from triforge.confine import unix_socket
from triforge.core.errors import UserError

IDLE_S = 600.0
START_S = 60.0  # until the server's socket answers (the worker itself starts with the first check)


# --- where, and which server ---------------------------------------------------------------------

def runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR")
    d = Path(base) / "triforge-astra" if base and os.access(base, os.W_OK) else Path(f"/tmp/triforge-astra-{os.getuid()}")
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = d.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise UserError(f"{d} must belong to you and be closed to others (chmod 700) to hold the warm lab worker")
    return d


def gpu_nodes() -> bool:
    """Whether this machine shows NVIDIA device nodes (a cheap look, no torch import)."""
    return any(Path("/dev").glob("nvidia[0-9]*"))


def gpu_key() -> str:
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is None:
        return "all"
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in vis)[:64] or "none"


def paths() -> tuple[Path, Path, Path, Path]:
    """(socket, pidfile, lock, log) of this user's server for the current GPU selection."""
    d = runtime_dir()
    stem = d / f"lab-gpu-{gpu_key()}"
    return stem.with_suffix(".sock"), stem.with_suffix(".pid"), stem.with_suffix(".lock"), stem.with_suffix(".log")


def stamp() -> str:
    """What a server must share with its client: the lab's code, the settings its worker starts with."""
    import triforge

    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    confine = root.parent / "confine"  # the isolation the worker runs under is part of what it is
    for p in sorted(root.rglob("*.py")) + sorted(root.rglob("*.cu")) + sorted(confine.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(root.parent)}:{st.st_mtime_ns}:{st.st_size};".encode())
    for k in ("TRIFORGE_ISOLATION", "TRIFORGE_ASTRA_CACHE", "CUDA_VISIBLE_DEVICES", "PYTHONPATH", "TRIFORGE_TMP_MB"):
        h.update(f"{k}={os.environ.get(k, '')};".encode())
    h.update(f"{sys.executable};{getattr(triforge, '__version__', '')}".encode())
    return h.hexdigest()[:16]


# --- client --------------------------------------------------------------------------------------

def _connect(path: Path, timeout: float) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        unix_socket.connect(s, path)
    except OSError:
        s.close()
        return None
    return s


def _ask(path: Path, msg: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """One request on a fresh connection; None when no server answers there."""
    s = _connect(path, 5.0)
    if s is None:
        return None
    with s:
        try:
            worker_wire.send(s.fileno(), msg, timeout)
            return worker_wire.recv(s.fileno(), timeout)
        except (worker_wire.WireTimeout, EOFError, OSError, ValueError):
            return None


@contextmanager
def _locked(lock: Path):
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_server(handler: str | None = None, idle_s: float = IDLE_S) -> Path:
    """The socket of a running server with this client's stamp, starting one (or replacing a stale one)."""
    sock, pidfile, lock, log = paths()
    want = stamp()
    with _locked(lock):
        hello = _ask(sock, {"op": "hello"}, 10.0)
        if hello is not None and hello.get("stamp") == want and hello.get("handler") == (handler or "lab"):
            return sock
        if hello is not None:
            _ask(sock, {"op": "stop"}, 10.0)
            _wait_gone(sock)
        if sock.exists():
            sock.unlink()
        argv = [sys.executable, "-m", "triforge.astra.warm_worker", str(sock), str(idle_s), want, handler or "lab"]
        with open(log, "ab") as out:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                             close_fds=True, cwd=str(sock.parent))
        end = time.monotonic() + START_S
        while time.monotonic() < end:
            if (h := _ask(sock, {"op": "hello"}, 5.0)) is not None and h.get("stamp") == want:
                return sock
            time.sleep(0.05)
    tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
    raise UserError(f"the warm lab worker did not start within {START_S:.0f} s: {tail.strip() or 'no output'}")


def _wait_gone(sock: Path, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and _ask(sock, {"op": "hello"}, 2.0) is not None:
        time.sleep(0.05)


def request(msg: dict[str, Any], timeout: float, handler: str | None = None) -> dict[str, Any]:
    """Send `msg` to the warm server (starting it when needed); a server-side refusal becomes a UserError."""
    sock = ensure_server(handler)
    reply = _ask(sock, msg, timeout + 30.0)
    if reply is None:
        raise UserError("the warm lab worker did not answer (it may have been stopped): run the command again")
    if "error" in reply:
        raise UserError(str(reply["error"]))
    return reply


def check(task: str, source: str, options: dict[str, Any], timeout: float, sanitize: bool = False,
          kernel_path: str | None = None) -> dict[str, Any]:
    """`check_host.check` in the warm worker."""
    return request({"op": "check", "task": task, "source": source, "options": options, "timeout": timeout,
                    "sanitize": sanitize, "kernel_path": kernel_path}, timeout)


def stop() -> bool:
    """Stop this user's server for the current GPU selection; False when none was running."""
    sock = paths()[0]
    if _ask(sock, {"op": "stop"}, 10.0) is None:
        return False
    end = time.monotonic() + 10.0
    while sock.exists() and time.monotonic() < end:
        time.sleep(0.02)
    return True


# --- server --------------------------------------------------------------------------------------

def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


class Server:
    def __init__(self, sock: Path, idle_s: float, stamp_: str, handler: str) -> None:
        self.sock, self.idle_s, self.stamp, self.handler = sock, idle_s, stamp_, handler
        self.worker: Any = None
        self.served = 0

    def _worker(self, timeout: float):
        from triforge.astra.worker import LAB_JOBS, Worker

        if self.worker is None:
            self.worker = Worker(timeout=timeout, handler=LAB_JOBS if self.handler == "lab" else self.handler)
        self.worker.timeout = timeout
        return self.worker

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        op = msg.get("op")
        if op == "hello":
            return {"stamp": self.stamp, "handler": self.handler, "pid": os.getpid(), "served": self.served}
        if op == "check":
            from triforge.astra.check_host import check, precheck, require_gpu
            from triforge.astra.evaluate import EvalOptions

            if (early := precheck(msg["task"], msg["source"])) is not None:
                return early
            require_gpu()
            w = self._worker(float(msg.get("timeout") or 600))
            return check(msg["task"], msg["source"], EvalOptions(**msg.get("options", {})), w,
                         sanitize=bool(msg.get("sanitize")), kernel_path=msg.get("kernel_path"))
        if op == "job":  # a raw job for the worker's handler (the tests' handler; the lab's runs only its kinds)
            return self._worker(float(msg.get("timeout") or 300)).call(msg["job"], msg.get("timeout"))
        raise ValueError(f"unknown request {op!r}")

    def serve(self) -> None:
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            unix_socket.bind(srv, self.sock)
        finally:
            os.umask(old)
        inode = self.sock.stat().st_ino
        srv.listen(16)
        srv.settimeout(self.idle_s)
        pidfile = self.sock.with_suffix(".pid")
        pidfile.write_text(f"{os.getpid()}\n")
        try:
            while True:
                try:
                    conn, _ = srv.accept()
                except TimeoutError:
                    return  # idle for idle_s: leave
                with conn:
                    conn.settimeout(None)
                    if _peer_uid(conn) != os.getuid():
                        continue
                    try:
                        msg = worker_wire.recv(conn.fileno(), 30.0)
                    except (worker_wire.WireTimeout, EOFError, OSError, ValueError):
                        continue
                    if msg.get("op") == "stop":
                        worker_wire.send(conn.fileno(), {"stopped": True}, 10.0)
                        return
                    try:
                        reply = self.handle(msg)
                        self.served += 1
                    except UserError as exc:
                        reply = {"error": str(exc)}
                    except Exception as exc:  # noqa: BLE001 - the client says it in one line; the server goes on
                        reply = {"error": f"warm lab worker: {type(exc).__name__}: {exc}"}
                    try:
                        worker_wire.send(conn.fileno(), reply, 30.0)
                    except (worker_wire.WireTimeout, OSError):
                        pass
        finally:
            try:  # only what is still ours: a successor may have bound the path already
                if self.sock.stat().st_ino == inode:
                    self.sock.unlink()
                if pidfile.read_text().strip() == str(os.getpid()):
                    pidfile.unlink()
            except OSError:
                pass
            srv.close()
            if self.worker is not None:
                self.worker.stop()


def main(argv: list[str]) -> int:
    sock, idle_s, stamp_, handler = argv
    Server(Path(sock), float(idle_s), stamp_, handler).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
