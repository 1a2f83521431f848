"""The lab's job handler, run inside the worker (`Worker`'s default `handler`): a job dict in, a reply dict out.

It sits above the whole lab (evaluate, bench, lab) and nothing imports it: the worker names it by its
dotted path, so the worker host stays below what its jobs run.
"""

from __future__ import annotations

from typing import Any

from triforge.astra import gpu
from triforge.astra.bench import bench_task
from triforge.astra.evaluate import EvalOptions, evaluate
from triforge.astra.lab import evaluate_in_worker


def handle(job: dict[str, Any]) -> dict[str, Any]:
    kind = job["kind"]
    if kind in ("evaluate", "bench", "lab_evaluate"):
        gpu.ensure_context()
    if kind == "evaluate":
        return evaluate(job["task"], job["source"], EvalOptions(**job.get("options", {}))).to_dict()
    if kind == "lab_evaluate":  # the agents' lab: a task variant (user file, extra shapes), then evaluate
        return evaluate_in_worker(**job.get("kwargs", {}))
    if kind == "bench":
        return bench_task(job["task"], job.get("source"), **job.get("options", {}))
    raise ValueError(f"unknown job kind {kind!r}")
