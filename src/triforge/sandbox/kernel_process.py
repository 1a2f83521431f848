"""One sandboxed kernel process: launch under limits, talk to it over ZMQ, interrupt it, kill it whole.

The kernel speaks the Jupyter protocol over ZMQ `ipc` sockets (Unix sockets in a private runtime
directory), so it needs no network at all and works inside its own network namespace.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import weakref
from hmac import compare_digest
from pathlib import Path
from typing import Any

import psutil
import zmq
from jupyter_client.session import Session

from triforge.confine.host import CgroupSet, Isolation
from triforge.confine.isolation import CONFINEMENT_FAILED, refusal
from triforge.confine.limits import SandboxLimits
from triforge.confine.tree import descendants, running, task_count, wait_gone
from triforge.sandbox.kernel_launch import (
    PORTS,
    SandboxError,
    checked_isolation,
    find_kernel_pid,
    launch,
    pidfd,
    remove_stale_runtimes,
    socket_base,
)

__all__ = ["KernelProcess", "SandboxError", "writable_in"]


def writable_in(kernel: KernelProcess, path: Path) -> bool:
    """Whether `path` is writable for `kernel` (always true when the filesystem was left writable)."""
    if kernel.writable is None:
        return True
    p = os.path.realpath(path)
    return any(p == w or p.startswith(w.rstrip("/") + "/") for w in kernel.writable)


_LIVE: weakref.WeakSet[KernelProcess] = weakref.WeakSet()


@atexit.register
def _kill_live_kernels() -> None:
    for kernel in list(_LIVE):
        kernel.kill()


class KernelProcess:
    """A started, handshaken kernel. Not thread-safe: one user at a time."""

    def __init__(self, limits: SandboxLimits, cwd: Path, startup_timeout: float = 60.0) -> None:
        self.limits = limits
        self.cwd = cwd
        remove_stale_runtimes()
        self.runtime = Path(tempfile.mkdtemp(prefix=f"tfk-{os.getpid()}-"))
        self.cgroups = CgroupSet(limits.max_processes, limits.memory_mb)
        self.session = Session(key=uuid.uuid4().hex.encode(), signature_scheme="hmac-sha256", username="triforge")
        self._ctx = zmq.Context.instance()
        self.shell = self.iopub = None
        self._poller: zmq.Poller | None = None
        self._own: set[int] = set()
        self.popen: subprocess.Popen[bytes] | None = None
        self.kernel_pid = 0
        self.writable: list[str] | None = None
        self._lifeline: int | None = None
        self._pidfd: int | None = None
        self._kernel_pidfd: int | None = None
        self._ns_init: int | None = None
        self.isolation_reaper = False
        self.isolation: Isolation | None = None
        self._killed = False
        _LIVE.add(self)
        try:
            self._start()
            self._handshake(startup_timeout)
            assert self.popen is not None
            self.kernel_pid = find_kernel_pid(self.popen)
            self._kernel_pidfd = pidfd(self.kernel_pid)  # wakes `recv` once the kernel is reaped
            if self._poller is not None and self._kernel_pidfd is not None:
                self._poller.register(self._kernel_pidfd, zmq.POLLIN)
            parent = psutil.Process(self.kernel_pid).ppid()
            self._own = {self.popen.pid, self.kernel_pid, parent}
            # PID 1 of the kernel's namespace: killing it takes every process of the namespace at once
            self._ns_init = parent if parent != os.getpid() and self.isolation_reaper else None
            self.isolation = checked_isolation(self.kernel_pid, self.cgroups, limits, self.mechanism)
        except BaseException:
            self.kill()
            raise

    def _start(self) -> None:
        base = socket_base(self.runtime)
        # connect first: ZMQ queues until the kernel binds, so no early message is lost
        self.shell = self._socket(zmq.DEALER, f"ipc://{base}-{PORTS['shell_port']}")
        self.iopub = self._socket(zmq.SUB, f"ipc://{base}-{PORTS['iopub_port']}")
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        started = launch(self.limits, self.cwd, self.runtime, self.cgroups, self.session.key.decode())
        self.popen, self.mechanism, self.writable = started.popen, started.mechanism, started.writable
        self.isolation_reaper, self._lifeline, self._pidfd = started.reaper, started.lifeline, started.pidfd

    def _socket(self, kind: int, addr: str) -> zmq.Socket:
        sock = self._ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RECONNECT_IVL, 10)
        sock.connect(addr)
        return sock

    def _handshake(self, timeout: float) -> None:
        """Wait until the kernel answers on shell and its iopub reaches us (no output is lost later)."""
        replied = welcomed = False
        sent: set[str] = set()
        end = time.monotonic() + timeout
        next_ask = 0.0
        while not (replied and welcomed):
            now = time.monotonic()
            if now > end:
                raise SandboxError(f"kernel did not start within {timeout:.0f} s: {self.log_tail()}")
            if not self.alive():
                if self.popen is not None and self.popen.poll() == CONFINEMENT_FAILED:
                    raise refusal(self.log_tail(300).splitlines()[-1])
                raise SandboxError(f"kernel exited while starting: {self.log_tail()}")
            if not replied and now >= next_ask:  # ask again now and then, as jupyter_client does
                msg = self.session.msg("kernel_info_request", {})
                self.session.send(self.shell, msg)
                sent.add(msg["header"]["msg_id"])
                next_ask = now + 0.5
            for channel, m in self.recv(0.05):
                if channel == "shell" and m["parent_header"].get("msg_id") in sent:
                    replied = True
                elif channel == "iopub":
                    welcomed = True

    def log_tail(self, n: int = 2000) -> str:
        try:
            return (self.runtime / "kernel.log").read_text(errors="replace")[-n:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def send_execute(self, code: str) -> str:
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        }
        msg = self.session.msg("execute_request", content)
        self.session.send(self.shell, msg)
        return msg["header"]["msg_id"]

    def warm_up(self, timeout: float = 10.0) -> None:
        """Run a few throwaway cells, so that the first real cell does not pay for first-time setup."""
        for code in ("1 + 1", "_w = 1", "print(end='')"):
            self._run_setup(code, timeout, silent=False)
        self.run_silent("del _w", timeout)

    def run_silent(self, code: str, timeout: float = 10.0) -> None:
        """Run setup code without output or history; raise `SandboxError` if it fails."""
        self._run_setup(code, timeout, silent=True)

    def _run_setup(self, code: str, timeout: float, silent: bool) -> None:
        """Run `code` outside the history and wait for its reply and for the kernel to be idle again."""
        msg = self.session.msg("execute_request", {"code": code, "silent": silent, "store_history": False,
                                                   "user_expressions": {}, "allow_stdin": False})
        self.session.send(self.shell, msg)
        replied = idle = False
        end = time.monotonic() + timeout
        while not (replied and idle):
            if time.monotonic() > end or not self.alive():
                raise SandboxError(f"kernel setup did not finish: {self.log_tail()}")
            for channel, m in self.recv(0.1):
                if m["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
                    continue
                if channel == "shell":
                    replied = True
                    if m["content"].get("status") != "ok":
                        raise SandboxError(f"kernel setup failed: {m['content'].get('evalue', '')}")
                idle = idle or (m["msg_type"] == "status" and m["content"].get("execution_state") == "idle")

    def recv(self, timeout: float) -> list[tuple[str, dict[str, Any]]]:
        if self._poller is None:
            self._poller = zmq.Poller()
            self._poller.register(self.shell, zmq.POLLIN)
            self._poller.register(self.iopub, zmq.POLLIN)
            for fd in (self._pidfd, self._kernel_pidfd):  # readable once the launcher or the kernel ended
                if fd is not None:
                    self._poller.register(fd, zmq.POLLIN)
        out = []
        for sock, _ in self._poller.poll(max(timeout, 0) * 1000):
            if sock in (self._pidfd, self._kernel_pidfd):
                continue
            name = "shell" if sock is self.shell else "iopub"
            for _ in range(256):  # bounded, so that a flood of output cannot starve the deadline check
                try:
                    parts = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                msg = self._decode(parts)
                if msg is not None:
                    out.append((name, msg))
        return out

    def _decode(self, parts: list[bytes]) -> dict[str, Any] | None:
        """A signed message as plain dicts; None for a malformed or badly signed one.

        Leaner than Session.deserialize: no date parsing, no protocol adaptation (ipykernel
        speaks the current protocol), which matters on the round trip of small cells.
        """
        try:
            i = parts.index(b"<IDS|MSG>")
        except ValueError:
            return None
        signature, frames = parts[i + 1], parts[i + 2 : i + 6]
        if len(frames) < 4 or not compare_digest(signature, self.session.sign(frames)):
            return None
        unpack = self.session.unpack
        header = unpack(frames[0])
        return {"header": header, "msg_type": header.get("msg_type"), "parent_header": unpack(frames[1]),
                "content": unpack(frames[3])}

    def alive(self) -> bool:
        """The launcher and the kernel under it: the launcher outlives a killed kernel for a moment."""
        if self._killed or self.popen is None or self.popen.poll() is not None:
            return False
        if not self.kernel_pid:
            return True
        return running(self.kernel_pid)  # a zombie counts as ended (its pidfd is not readable before reaping)

    def exit_description(self) -> str:
        code = self.popen.poll() if self.popen else None
        if code is None and self.popen is not None and self.kernel_pid and not running(self.kernel_pid):
            try:  # the kernel is gone; its launcher exits with its status in a moment
                code = self.popen.wait(timeout=2)
            except subprocess.TimeoutExpired:
                return "gone (its launcher is still running)"
        if code is None:
            return "still running"
        if code > 128:
            try:
                return f"killed by {signal.Signals(code - 128).name}"
            except ValueError:
                pass
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exited with code {code}"

    def interrupt(self) -> None:
        try:
            os.kill(self.kernel_pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError):
            pass

    def cpu_seconds(self) -> float:
        """CPU time used so far: the whole cgroup (kernel and children) if there is one, else the kernel."""
        ns = self.cgroups.cpu_ns()
        if ns is not None:
            return ns / 1e9
        try:
            return sum(psutil.Process(self.kernel_pid).cpu_times()[:2])
        except psutil.Error:
            return 0.0

    def members(self) -> set[int]:
        """Every process that belongs to this kernel (zombies included), host PIDs."""
        pids = self.cgroups.pids()
        if self.popen is not None:
            pids.add(self.popen.pid)
            if "pids" not in self.cgroups.dirs:  # no cgroup holding them all: walk the tree
                pids |= descendants(self.popen.pid)
        return pids

    def task_count(self) -> int:
        """Tasks (threads count) of every process of this kernel: what RLIMIT_NPROC counts."""
        return task_count(self.members())

    def strays(self) -> list[int]:
        """Processes the kernel's code started that are still running (zombies excluded)."""
        return [pid for pid in self.members() - self._own if running(pid)]

    def kill_strays(self) -> int:
        """Kill what `strays` finds; return how many distinct processes were killed."""
        killed: set[int] = set()
        for _ in range(20):  # repeat: a dying parent may have forked once more
            pids = [p for p in self.strays() if p not in killed]
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)
        return len(killed)

    def kill(self) -> None:
        """Kill the kernel and everything it started; remove its runtime directory and cgroups."""
        if self._killed:
            return
        self._killed = True
        if self.popen is not None:
            if self._ns_init is not None:
                try:
                    os.kill(self._ns_init, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            members = self.members()
            for pid in [self.popen.pid, *members]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.popen.wait()
            wait_gone(members, 3.0)
        self.cgroups.destroy()
        for fd in (self._lifeline, self._pidfd, self._kernel_pidfd):
            if fd is not None:
                os.close(fd)
        self._lifeline = self._pidfd = self._kernel_pidfd = None
        self._poller = None
        for sock in (self.shell, self.iopub):
            if sock is not None:
                sock.close(0)
        self.shell = self.iopub = None
        shutil.rmtree(self.runtime, ignore_errors=True)
        _LIVE.discard(self)
