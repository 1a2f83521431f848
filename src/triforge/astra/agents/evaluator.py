"""The evaluation seam: the loop hands candidates to an `Evaluator` and reads verdicts back.

`GpuPool` runs them now, one confined lab worker per visible GPU; `Deferred` only leaves them in the run
directory (`candidates/<id>/kernel.cu` and `job.json`) for `triforge astra evaluate DIR` on a GPU machine,
which writes `result.json` beside each. A scale-out engine plugs in through the same Protocol.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from triforge.astra import lab
from triforge.astra.worker import Worker, require_isolation
from triforge.confine.isolation import IsolationUnavailable
from triforge.core.rundir import write_json_atomic
from triforge.executors import local as executor
from triforge.executors.local import visible_gpus


@dataclass
class EvalJob:
    """One evaluation: `shapes` train (train + fuzz + the testing agent's shapes) or heldout."""

    id: str
    task: str
    source: str
    shapes: str = "train"
    extra_shapes: list[dict[str, int]] = field(default_factory=list)
    time_heldout: bool = False  # time the held-out shapes instead of the task's timing shapes (final check)
    bench: bool = False  # also the comparator table (final check)
    profile: bool = False  # also the ncu digest when the verdict is correct
    task_file: str | None = None  # relative to the run directory

    def spec(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source")
        return d


class EvaluationPending(Exception):
    """Candidates wait for an evaluation that happens elsewhere (deferred mode)."""

    def __init__(self, waiting: list[str]) -> None:
        super().__init__(f"{len(waiting)} candidate(s) wait for evaluation")
        self.waiting = waiting


class Evaluator(Protocol):
    def evaluate(self, jobs: list[EvalJob], run_dir: Path) -> dict[str, dict[str, Any]]:
        """Results by job id for the jobs evaluated now; a job left out is waiting. Never raises for one job:
        a candidate that breaks the evaluation gets verdict `crash` with the reason."""
        ...

    def close(self) -> None: ...


class PinnedWorker(Worker):
    """A lab worker that sees one GPU (restarts after a crash keep the pin)."""

    def __init__(self, gpu: int | None, timeout: float, **kw: Any) -> None:
        super().__init__(timeout=timeout, **kw)
        self.gpu = gpu

    def start(self) -> None:
        if self.gpu is not None:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            self.visible_devices = visible.split(",")[self.gpu] if visible else str(self.gpu)
        super().start()


def gpu_of(worker: Any) -> str:
    """The GPU a worker's jobs run on, as CUDA_VISIBLE_DEVICES names it (CUDA takes the first one listed);
    known before the worker starts, so a job refused before reaching it is still placed."""
    pin = getattr(worker, "visible_devices", None)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not pin and getattr(worker, "gpu", None) is not None:
        pin = visible.split(",")[worker.gpu] if visible else str(worker.gpu)
    pin = pin or visible
    return str(pin).split(",")[0].strip() if pin else "0"


def run_job(job: EvalJob, worker: Any, run_dir: Path, timeout: float = 900) -> dict[str, Any]:
    """Check, then (when asked and correct) comparators and the profile digest, as one result dict that
    also names the GPU (`gpu`, as CUDA_VISIBLE_DEVICES names it) and the host that evaluated the job."""
    res = _run_job(job, worker, run_dir, timeout)
    res["gpu"], res["host"] = gpu_of(worker), socket.gethostname()
    res["isolation"] = confinement_of(worker)
    return res


def confinement_of(worker: Any) -> str:
    """What confined the worker's candidate code where it ran (read back from /proc, cached per policy)."""
    try:
        return require_isolation(getattr(worker, "policy", None))
    except IsolationUnavailable as exc:  # a worker that ran anything was confined; say what the probe says now
        return f"unknown: {str(exc)[:200]}"


def _run_job(job: EvalJob, worker: Any, run_dir: Path, timeout: float) -> dict[str, Any]:
    task_file = str(run_dir / job.task_file) if job.task_file else None
    try:
        res = lab.check(job.task, job.source, worker=worker, shapes=job.shapes, extra_shapes=job.extra_shapes,
                        time_heldout=job.time_heldout, task_file=task_file, timeout=timeout).to_dict()
    except IsolationUnavailable:  # no candidate may run here: the run stops with the one-line refusal
        raise
    except Exception as exc:  # noqa: BLE001 - one job never stops the others
        return {"verdict": "crash", "reasons": [f"evaluation failed: {type(exc).__name__}: {exc}"]}
    notes: list[str] = []
    if job.bench and res["verdict"] == "correct":
        try:
            b = lab.bench(job.task, job.source, worker=worker, task_file=task_file)
            res["bench"] = {"rows": [asdict(r) for r in b.rows], "copy_gbs": b.copy_gbs, "notes": b.notes,
                            "device": b.device}
        except Exception as exc:  # noqa: BLE001 - the comparator table is reported missing, with why
            notes.append(f"comparators not measured: {type(exc).__name__}: {str(exc)[:300]}")
    if job.profile and res["verdict"] == "correct":
        try:
            p = lab.profile(job.task, job.source, gpu=gpu_of(worker))  # ncu on the job's GPU, not another's
            res["profile"] = {"shape": p.shape, "digest": p.digest}
        except Exception as exc:  # noqa: BLE001 - no ncu, no permission: the agents are told it is absent
            res["profile"] = {"absent": f"{type(exc).__name__}: {str(exc)[:300]}"}
    if notes:
        res["notes"] = notes
    return res


class GpuPool:
    """One worker per visible GPU, kept warm across batches; a batch is spread over them by the core's
    local executor (one task per GPU at a time, `assigned_gpu()` naming the task's worker)."""

    def __init__(self, gpus: int | None = None, timeout: float = 900, **worker_kw: Any) -> None:
        self.isolation = require_isolation(worker_kw.get("policy"))  # a refusal comes before any model call
        n = visible_gpus() if gpus is None else gpus
        self.workers = [PinnedWorker(i if n > 1 else None, timeout, **worker_kw) for i in range(max(1, n))]
        self.slots = executor.LocalPool(gpus=len(self.workers))
        self.timeout = timeout

    def evaluate(self, jobs: list[EvalJob], run_dir: Path) -> dict[str, dict[str, Any]]:
        def one(job: EvalJob) -> tuple[str, dict[str, Any]]:
            return job.id, run_job(job, self.workers[executor.assigned_gpu() or 0], run_dir, self.timeout)

        return dict(self.slots.map(one, jobs, gpu=True))  # type: ignore[arg-type]

    def close(self) -> None:
        for w in self.workers:
            w.stop()


class Deferred:
    """Evaluates nothing: the loop has written each job's files; `triforge astra evaluate` does the rest."""

    def evaluate(self, jobs: list[EvalJob], run_dir: Path) -> dict[str, dict[str, Any]]:
        return {}

    def close(self) -> None:
        pass


def job_dir(run_dir: Path, job_id: str) -> Path:
    return run_dir / "candidates" / job_id


def write_job(run_dir: Path, job: EvalJob) -> None:
    d = job_dir(run_dir, job.id)
    d.mkdir(parents=True, exist_ok=True)
    (d / "kernel.cu").write_text(job.source, encoding="utf-8")
    write_json_atomic(d / "job.json", job.spec())


def read_result(run_dir: Path, job_id: str) -> dict[str, Any] | None:
    p = job_dir(run_dir, job_id) / "result.json"
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def waiting_jobs(run_dir: Path) -> list[EvalJob]:
    """Jobs written to the run directory that have no result yet."""
    out = []
    for spec_path in sorted((run_dir / "candidates").glob("*/job.json")):
        if (spec_path.parent / "result.json").is_file():
            continue
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
        out.append(EvalJob(source=(spec_path.parent / "kernel.cu").read_text(encoding="utf-8"), **spec))
    return out


def evaluate_waiting(run_dir: Path, evaluator: Evaluator, on_result=None) -> int:
    """`triforge astra evaluate DIR`: evaluate every waiting job and write its result.json."""
    jobs = waiting_jobs(run_dir)
    width = max(1, len(getattr(evaluator, "workers", [None])))
    done = 0
    for i in range(0, len(jobs), width):  # a kill loses at most one batch in flight
        batch = jobs[i: i + width]
        results = evaluator.evaluate(batch, run_dir)
        for job in batch:
            if job.id in results:
                write_json_atomic(job_dir(run_dir, job.id) / "result.json", results[job.id])
                done += 1
                if on_result is not None:
                    on_result(job.id, results[job.id])
    return done
