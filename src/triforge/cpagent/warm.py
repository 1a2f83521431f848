"""Harness jobs in forked children of a server that has already imported cpmpy and OR-Tools.

A fresh interpreter spends about half a second importing cpmpy before a check can start; forking a
warm server (`ref_jobs.py serve`) skips that, which is what keeps fix-and-solve under a second. Each
job still runs in its own process group with a deadline and is killed whole on timeout. Servers are
started on first use, one per concurrent caller, and end when this process exits.
Set TRIFORGE_CPBENCH_WARM=0 to use a plain subprocess per job instead. Where the confined fork server
(`triforge.confine.forkserver`, shared with graded programs and kept between commands) can take a job,
it does; these per-process servers are the path with it turned off (TRIFORGE_FORKSERVER=0).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from triforge.confine import forkserver
from triforge.confine.run import IsolatedProcess

OUTPUT_LIMIT = 64_000


@dataclass
class WarmResult:
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str


def _read(path: Path) -> str:
    if not path.is_file():
        return ""
    from triforge.core.tools import cap_text  # core.tools brings the LLM client: only on this (old) path

    text, _ = cap_text(path.read_text(errors="replace"), OUTPUT_LIMIT)
    return text


def enabled() -> bool:
    return os.environ.get("TRIFORGE_CPBENCH_WARM", "1") != "0" and hasattr(os, "fork")


class WarmServer:
    """A harness server confined by the isolation policy (reference models come from downloaded data):
    it sees only its own jobs folder, where each job's files are copied in and its results copied out."""

    def __init__(self, harness: Path, python: str = sys.executable) -> None:
        self.jobs = Path(tempfile.mkdtemp(prefix="triforge-warm-jobs-"))
        try:
            self.server = IsolatedProcess([python, str(harness), "serve"], workdir=self.jobs, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except BaseException:
            shutil.rmtree(self.jobs, ignore_errors=True)
            raise
        self.proc = self.server.popen
        ready = self.proc.stdout.readline() if self.proc.stdout else ""
        if not ready.strip():
            self.close()
            raise RuntimeError("warm harness server did not start")

    def run(self, mode: str, job: Path, result: Path, timeout: float, nice: int = 0) -> WarmResult:
        out, err = result.with_suffix(".stdout"), result.with_suffix(".stderr")
        slot = Path(tempfile.mkdtemp(dir=self.jobs))
        try:
            shutil.copyfile(job, slot / "job.json")
            req = {"mode": mode, "job": str(slot / "job.json"), "result": str(slot / "result.json"),
                   "stdout": str(slot / "stdout"), "stderr": str(slot / "stderr"), "timeout": timeout, "nice": nice}
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
            if not reply:
                raise RuntimeError("warm harness server died")
            r = json.loads(reply)
            for name, dest in (("result.json", result), ("stdout", out), ("stderr", err)):
                if (slot / name).is_file():
                    shutil.copyfile(slot / name, dest)
        finally:
            shutil.rmtree(slot, ignore_errors=True)
        return WarmResult(bool(r["timed_out"]), float(r["seconds"]), _read(out), _read(err))

    def close(self) -> None:
        self.server.close()
        shutil.rmtree(self.jobs, ignore_errors=True)


def _forked(harness: Path, mode: str, job: Path, result: Path, timeout: float, nice: int) -> WarmResult | None:
    from triforge.cpagent.program_run import PRELOAD

    with tempfile.TemporaryDirectory(prefix="triforge-job-") as tmp:
        shutil.copyfile(job, Path(tmp, "job.json"))
        run = forkserver.run_forked([sys.executable, str(harness), mode, str(Path(tmp, "job.json")),
                                     str(Path(tmp, "result.json"))], workdir=tmp, timeout=timeout, nice=nice,
                                    output_limit=OUTPUT_LIMIT, preload=PRELOAD)
        if run is None:
            return None
        if Path(tmp, "result.json").is_file():
            shutil.copyfile(Path(tmp, "result.json"), result)
    r = run.result
    return WarmResult(r.timed_out, r.duration_s, r.stdout, r.stderr)


_pools: dict[Path, WarmPool] = {}
_pools_lock = threading.Lock()


def pool(harness: Path) -> WarmPool:
    """The process-wide pool for `harness` (servers are a process resource, like open files; closed at exit)."""
    with _pools_lock:
        if harness not in _pools:
            _pools[harness] = WarmPool(harness)
            atexit.register(_pools[harness].close)
        return _pools[harness]


class WarmPool:
    """Idle servers handed out one caller at a time; a broken server is dropped and replaced."""

    def __init__(self, harness: Path) -> None:
        self.harness = harness
        self._idle: list[WarmServer] = []
        self._lock = threading.Lock()

    def run(self, mode: str, job: Path, result: Path, timeout: float, nice: int = 0) -> WarmResult:
        if (forked := _forked(self.harness, mode, job, result, timeout, nice)) is not None:
            return forked
        with self._lock:
            server = self._idle.pop() if self._idle else None
        if server is None:
            server = WarmServer(self.harness)
        try:
            out = server.run(mode, job, result, timeout, nice)
        except (OSError, RuntimeError, ValueError):
            server.close()
            raise
        with self._lock:
            self._idle.append(server)
        return out

    def close(self) -> None:
        with self._lock:
            servers, self._idle = self._idle, []
        for s in servers:
            s.close()
