"""Subprocesses with deadlines: own process group, killed whole on timeout, output capped."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_OUTPUT_LIMIT = 64_000


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


def cap_text(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and tail of `text` within `limit` characters, with a marker saying how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text, False
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}", True


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


def run(
    cmd: Sequence[str],
    *,
    timeout: float | None = 60.0,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    preexec_fn=None,
) -> ProcResult:
    """Run `cmd` in its own process group; on timeout kill the whole group.

    Never raises for a failing or hanging program; a command that cannot be started at all
    (missing executable) raises `FileNotFoundError` as usual.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd),
        cwd=str(cwd) if cwd is not None else None,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
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
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # Kill the whole group even on success: a program may leave background children behind.
        kill_group(proc.pid)
        proc.wait()
    stdout, st = out.text(2.0)
    stderr, et = err.text(2.0)
    for s in (proc.stdout, proc.stderr):
        s.close()
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
