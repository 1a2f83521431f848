"""The worker process: candidates compile and run here, never in the harness, and always confined.

The worker is an `IsolatedProcess` (`triforge.confine.run`: the launcher and `IsolationPolicy`
every other piece of model-written code runs under): no network, the host read-only, the home and
the host's /tmp hidden, its own writable folder, a memory bound. Readable besides: the interpreter
and its packages, the CUDA headers, the task files its jobs name; writable: the NVRTC disk cache.
An illegal memory access, a crash or a hang (watchdog) ends the worker and yields verdict `crash`;
the next job gets a fresh worker. Jobs and replies are plain dicts (`worker_wire`: JSON, not pickle).
Where isolation cannot be held and was not turned off, starting raises `IsolationUnavailable`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from triforge.astra import worker_wire
from triforge.astra.compile import CPU_BOUND_REASON, cache_dir, confined_env, cuda_reads, stopped_at_cpu_bound
from triforge.astra.task import all_tasks
from triforge.confine import isolation
from triforge.confine.isolation import CONFINEMENT_FAILED, IsolationPolicy, IsolationUnavailable, refusal
from triforge.confine.proc import ProcLimits
from triforge.confine.run import IsolatedProcess, verified

DEFAULT_TIMEOUT = 300.0
LAB_JOBS = "triforge.astra.worker_jobs.handle"  # the lab's job handler, run inside the worker


class WorkerStartError(RuntimeError):
    """The worker process could not be started; the message says why."""


def default_memory_mb() -> int:
    """The worker's memory bound: 3/4 of the machine's memory, at most 32 GiB (a lab worker peaks at a few)."""
    return min(32 << 10, (psutil.virtual_memory().total >> 20) * 3 // 4)


def job_reads(job: dict[str, Any]) -> set[str]:
    """Host folders a job needs to read: its task file's, and a user task's baseline kernel's."""
    kw = job.get("kwargs") or {}
    out = set()
    task_file = job.get("task_file") or kw.get("task_file")
    if task_file:
        out.add(str(Path(task_file).resolve().parent))
    spec = all_tasks().get(job.get("task") or kw.get("task_name") or "")
    base = getattr(spec, "baseline_path", None)
    if base is not None and not _in_package(Path(base)):
        out.add(str(Path(base).resolve().parent))
    return out


def _in_package(path: Path) -> bool:
    root = Path(__file__).resolve().parent
    return root in path.resolve().parents


def require_isolation(policy: IsolationPolicy | None = None) -> str:
    """What a worker's confinement holds here, read back from /proc; raises `IsolationUnavailable` (before
    any candidate, and before any model call when asked first) where it cannot hold and was not turned off."""
    policy = policy or IsolationPolicy.from_env()
    if not policy.enabled:
        return "NOT isolated (turned off)"
    if not (mech := isolation.mechanism()).available:  # asked each time: `verified` keeps what held when first probed
        raise refusal(mech.why_not)
    return verified(policy).confinement()


class Worker:
    """A restartable, confined worker process with a watchdog on every job.

    `handler`: dotted name of the function that answers a job dict inside the worker (the lab's
    `worker_jobs.handle` by default; tests pass their own). `policy`: the isolation policy (default: from the
    environment, so `--isolation none` turns it off); the worker's own widenings are added to it.
    `memory_mb`: bound on the worker's memory (a cgroup where one can be made, and RLIMIT_DATA per
    process). `visible_devices`: CUDA_VISIBLE_DEVICES for the worker (one GPU of a pool)."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, start_timeout: float = 180.0,
                 handler: str = LAB_JOBS, *, policy: IsolationPolicy | None = None,
                 memory_mb: int | None = None, visible_devices: str | None = None) -> None:
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.handler = handler
        self.policy = policy
        self.memory_mb = memory_mb or default_memory_mb()
        self.visible_devices = visible_devices
        self.reads: set[str] = set()
        self.restarts = 0
        self.isolation = ""  # what held for the last worker started, read back from /proc
        self.process: IsolatedProcess | None = None
        self._dir: Path | None = None
        self._jobs = self._replies = -1
        self._log: Path | None = None

    def alive(self) -> bool:
        return self.process is not None and self.process.popen.poll() is None

    def effective_policy(self) -> IsolationPolicy:
        base = self.policy or IsolationPolicy.from_env()
        # the GPU's device nodes (/dev/nvidia*, and which of them a driver needs varies): the host's /dev
        return base.widened(read_only=(*cuda_reads(), *sorted(self.reads)), writable=(str(cache_dir()),),
                            host_devices=True)

    def start(self) -> None:
        policy = self.effective_policy()
        self._dir = Path(tempfile.mkdtemp(prefix="triforge-astra-worker-"))
        work = self._dir / "work"  # the worker's one writable folder (its HOME and TMPDIR)
        work.mkdir()
        self._log = self._dir / "stderr.log"  # outside `work`: the worker writes it only through its fd
        jobs_r, self._jobs = os.pipe()
        self._replies, replies_w = os.pipe()
        argv = [sys.executable, "-m", "triforge.astra.worker_main", self.handler]
        try:
            with open(self._log, "ab") as log:
                self.process = IsolatedProcess(argv, workdir=work, policy=policy,
                                               limits=ProcLimits(memory_mb=self.memory_mb), memory_rlimit="RLIMIT_DATA",
                                               env=confined_env(work, self._env_extra()),
                                               stdin=jobs_r, stdout=replies_w, stderr=log)
        except IsolationUnavailable:
            self.stop()
            raise
        except Exception as exc:  # noqa: BLE001 - the cause, not a follow-up error, is what the user needs
            self.stop()
            raise WorkerStartError(f"astra worker could not be started: {type(exc).__name__}: {exc}") from exc
        finally:
            os.close(jobs_r)
            os.close(replies_w)
        self.isolation = self.process.isolation
        try:
            msg = worker_wire.recv(self._replies, self.start_timeout)
        except worker_wire.WireTimeout:
            self.stop()
            raise WorkerStartError(f"astra worker did not start within {self.start_timeout:.0f} s") from None
        except (EOFError, OSError, ValueError):
            code, tail = self._exit_code(), self._log_tail()
            self.stop()
            if code == CONFINEMENT_FAILED and "sandbox launcher:" in tail:
                raise refusal(tail.strip().splitlines()[-1]) from None
            raise WorkerStartError(f"astra worker exited during start (exit code {code}): "
                                   f"{tail.strip()[-800:] or 'no error output'}") from None
        if not msg.get("ready"):
            self.stop()
            raise WorkerStartError(f"astra worker failed to start: {'; '.join(map(str, msg.get('reasons') or []))}")

    def _env_extra(self) -> dict[str, str]:
        extra = {"TRIFORGE_ASTRA_CACHE": str(cache_dir())}  # the NVRTC disk cache, handed in writable
        if self.visible_devices is not None:
            extra["CUDA_VISIBLE_DEVICES"] = self.visible_devices
        return extra

    def _exit_code(self, wait: float = 5.0) -> int | None:
        if self.process is None:
            return None
        end = time.monotonic() + wait
        while self.process.popen.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        return self.process.popen.returncode

    def _log_tail(self, n: int = 4000) -> str:
        try:
            with open(self._log, "rb") as f:  # type: ignore[arg-type]
                f.seek(max(0, f.seek(0, os.SEEK_END) - n))
                return f.read().decode(errors="replace")
        except (OSError, TypeError):
            return ""

    def stop(self) -> None:
        for fd in (self._jobs, self._replies):
            if fd >= 0:
                os.close(fd)
        self._jobs = self._replies = -1
        if self.process is not None:
            self.process.close()
        self.process = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = self._log = None

    def call(self, job: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        reads = job_reads(job)
        if not reads <= self.reads:  # a folder the running worker cannot see: restart it with the folder
            self.reads |= reads
            if self.process is not None:
                self.stop()
        if not self.alive():
            if self.process is not None:
                self.stop()
                self.restarts += 1
            self.start()
        limit = timeout or self.timeout
        if self._log is not None:
            os.truncate(self._log, 0)  # the log holds the current job's output only
        try:
            worker_wire.send(self._jobs, job, limit)
            msg = worker_wire.recv(self._replies, limit)
        except worker_wire.WireTimeout:
            self.stop()
            return {"verdict": "crash", "reasons": [f"watchdog: no answer within {limit:.0f} s (a hang)"], "fatal": True}
        except (EOFError, OSError, ValueError):
            code = self._exit_code()
            stopped = self.process.stopped if self.process is not None else None
            self.stop()
            why = f"worker died (exit code {code})"
            if stopped:
                why = f"worker killed: {stopped}"
            elif stopped_at_cpu_bound(code):
                why += f": {CPU_BOUND_REASON}"
            return {"verdict": "crash", "reasons": [why], "fatal": True}
        if msg.get("fatal"):
            self.stop()
        return msg

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
