"""Candidates evaluated through the executor seam (`--executor ray`): one task per job, one GPU each.

Each task carries the job (source, shapes, options) and the text of its task file, starts its own lab
worker (confined by the isolation policy, as on the local pool) on the GPU it was given (Ray sets CUDA_VISIBLE_DEVICES for it), and returns the result dict. The
checks the lab makes before the GPU (interface, static anti-hack scan, PTX audit) run in the task too.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triforge.astra.agents.evaluator import EvalJob, PinnedWorker, run_job
from triforge.astra.worker import LAB_JOBS
from triforge.confine.isolation import IsolationUnavailable
from triforge.core.errors import UserError
from triforge.executors.local import Executor, assigned_gpu


@dataclass(frozen=True)
class JobTask:
    job: EvalJob
    task_file_text: str | None  # the run directory's copy of the task file, when the job names one
    timeout: float
    handler: str = LAB_JOBS  # the lab worker's job handler (see astra.worker.Worker)


def evaluate_job(t: JobTask) -> dict[str, Any]:
    """One job on whatever machine runs the task; its worker is started on first use and stopped after,
    pinned to the GPU the executor gave the task (the local pool's slot; Ray sets CUDA_VISIBLE_DEVICES)."""
    with tempfile.TemporaryDirectory(prefix="triforge-astra-job-") as d:
        run_dir = Path(d)
        if t.job.task_file and t.task_file_text is not None:
            path = run_dir / t.job.task_file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(t.task_file_text, encoding="utf-8")
        worker = PinnedWorker(assigned_gpu(), t.timeout, handler=t.handler)
        try:
            return run_job(t.job, worker, run_dir, t.timeout)
        finally:
            worker.stop()


class ExecutorPool:
    """An astra `Evaluator` over an executor: a batch of jobs runs as tasks, one GPU each, `width` at once
    (default: the GPUs the executor has). Owns the executor (closes it)."""

    def __init__(self, executor: Executor, width: int | None = None, timeout: float = 900,
                 handler: str = JobTask.handler) -> None:
        slots = executor.gpu_slots()
        if slots < 1:  # refused before any model is asked for a candidate
            raise UserError(f"candidates need a GPU each and the {executor.name} executor has none; "
                            "add a GPU node to the cluster or run where a GPU is visible")
        self.executor = executor
        self.isolation = f"on the {executor.name} executor's workers (each result.json records what held there)"
        self.width = max(1, width or slots)
        self.workers = [None] * self.width  # how many jobs `evaluate_waiting` hands over per batch
        self.timeout = timeout
        self.handler = handler

    def evaluate(self, jobs: list[EvalJob], run_dir: Path) -> dict[str, dict[str, Any]]:
        tasks = [JobTask(job, _read(run_dir / job.task_file) if job.task_file else None, self.timeout,
                         self.handler) for job in jobs]
        out = self.executor.map(evaluate_job, tasks, jobs=self.width, gpu=True, return_exceptions=True)
        refused = next((r for r in out if isinstance(r, IsolationUnavailable)), None)
        if refused is not None:  # no candidate may run there: the run stops with the one-line refusal
            raise refused
        return {job.id: r if isinstance(r, dict) else
                {"verdict": "crash", "reasons": [f"evaluation failed: {type(r).__name__}: {r}"]}
                for job, r in zip(jobs, out, strict=True)}

    def close(self) -> None:
        self.executor.close()


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None
