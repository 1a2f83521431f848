"""`cpagent bench`: the agent on many problems and seeds in parallel, graded strictly, resumable.

A resume reuses finished runs only when the settings are the same (`triforge.core.provenance`) and the
problem's content has not changed; runs stopped by the budget, the endpoint or the harness run again.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from triforge.confine.isolation import IsolationPolicy
from triforge.confine.record import isolation_record
from triforge.core import context
from triforge.core.budget import Budget
from triforge.core.llm import LLM
from triforge.core.provenance import guard_run_dir, refuse_stale_items, stale_items
from triforge.core.rundir import RunDir
from triforge.cpagent.agent import CPAgentConfig
from triforge.cpagent.bench_report import render_reports, summarize
from triforge.cpagent.run_settings import bench_fingerprint, task_hash
from triforge.cpagent.solve import FINAL, solve_task
from triforge.cpagent.task import CPTask
from triforge.executors.local import Executor, output_dir
from triforge.executors.local import current as current_executor
from triforge.sandbox.pool import KernelPool

# Why a run has no result yet, as the report says it; each is run again on resume.
UNFINISHED = {"endpoint_error": "failed at the endpoint", "budget_exceeded": "stopped by the budget",
              "harness_error": "failed in the harness", "not_run": "not run (the budget was spent)"}


def run_key(task_id: str, seed: int) -> str:
    return f"{task_id}#seed{seed}"


# This process's pool of started kernels, for tasks run here; a task on another process starts its own.
_kernels: ContextVar[KernelPool | None] = ContextVar("triforge_cpagent_kernels", default=None)


@dataclass(frozen=True)
class BenchItem:
    """One (problem, seed) as a task: all it needs to run on any process (`out`: its run directory)."""

    task: CPTask
    seed: int
    llm: LLM
    config: CPAgentConfig
    out: Path


def solve_item(item: BenchItem) -> dict[str, Any] | None:
    """The record of one (problem, seed), or None when the budget was spent before it started. Never raises:
    a failure is a harness_error record. Files go to the executor's `output_dir()` (else `item.out`)."""
    budget = context.budget()
    if budget is not None and budget.exceeded():
        return None
    cfg = replace(item.config, sample=item.seed)
    pool = _kernels.get()
    sandbox = pool.sandbox(timeout=cfg.cell_timeout_s) if pool else None
    try:
        return solve_task(item.task, item.llm, output_dir() or item.out, config=cfg, sandbox=sandbox, budget=budget)
    except Exception as e:  # noqa: BLE001 - one problem's failure must not end the benchmark
        return {"problem": item.task.id, "status": "harness_error", "message": f"{type(e).__name__}: {e}",
                "grade": {"status": "harness_error", "reasons": [str(e)[:300]]}}
    finally:
        if sandbox is not None:
            sandbox.close()


def run_bench(
    tasks: list[CPTask],
    llm: LLM,
    out: str | Path,
    *,
    seeds: int = 1,
    jobs: int = 4,
    config: CPAgentConfig | None = None,
    budget: Budget | None = None,
    on_done: Callable[[str, dict[str, Any]], None] | None = None,
    data: str | Path | None = None,
    fresh: bool = False,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """Run every (task, seed) not finished yet in `out`, then write results.json, report.md, report.html.

    `data` (the data set's path) is part of the settings; `fresh` moves earlier contents of `out` aside.
    The runs fan out over `executor` (default: the current one, `triforge.executors.local.current`).
    """
    config = config or CPAgentConfig()
    temperature = config.temperature if seeds == 1 else (config.temperature if config.temperature is not None else 0.7)
    config = replace(config, temperature=temperature)
    fp = bench_fingerprint(llm, config, data=str(data) if data is not None else None)
    rd = RunDir(out)
    moved = guard_run_dir(rd.path, fp, fresh=fresh)
    runs: dict[str, Any] = rd.load_results().get("runs", {})
    hashes = {run_key(t.id, s): task_hash(t) for t in tasks for s in range(seeds)}
    refuse_stale_items(rd.path, stale_items({k: r.get("item_hash") for k, r in runs.items()}, hashes))
    todo = [(t, s) for t in tasks for s in range(seeds) if runs.get(run_key(t.id, s), {}).get("status") not in FINAL]
    policy = IsolationPolicy.from_env()
    rd.write_config({"model": {"alias": llm.alias, **llm.config.model_dump()}, "seeds": seeds, "jobs": jobs,
                     "problems": [t.id for t in tasks], "fresh_check": config.fresh_check, "settings_hash": fp.hash,
                     # what held (each problem's trace has it too); with nothing to run, only the policy
                     "isolation": isolation_record(policy) if todo else policy.record()})
    lock = threading.Lock()
    pool = KernelPool(size=max(1, min(jobs, 8)), limits=None) if todo else None
    ex = executor or current_executor()
    items = [BenchItem(task, seed, llm, config, rd.path / "problems" / task.id / f"seed{seed}") for task, seed in todo]

    def record(i: int, rec: dict[str, Any] | BaseException | None) -> None:
        task, seed = todo[i]
        if rec is None:
            return  # not started: it stays missing, and a resume runs it
        if isinstance(rec, BaseException):  # the task's worker died on every attempt (TaskFailed)
            rec = {"problem": task.id, "status": "harness_error", "message": f"{type(rec).__name__}: {rec}",
                   "grade": {"status": "harness_error", "reasons": [str(rec)[:300]]}}
        rec.update({"seed": seed, "item_hash": hashes[run_key(task.id, seed)], **fp.stamp()})
        with lock:
            runs[run_key(task.id, seed)] = rec
            rd.write_results({"runs": runs})  # after every problem: a crash loses only work in flight
        if on_done:
            on_done(run_key(task.id, seed), rec)

    token = _kernels.set(pool)
    try:
        with context.use(budget=budget, limits=context.EndpointLimits(default_cap=llm.config.max_concurrency)):
            ex.map(solve_item, items, jobs=jobs, on_done=record, return_exceptions=True,
                   outputs=lambda item: item.out)
    finally:
        _kernels.reset(token)
        if pool is not None:
            pool.close()
    summary = summarize(runs, [t.id for t in tasks], seeds)
    summary.update({"unfinished": unfinished(runs, list(hashes)), **fp.stamp(),
                    "moved_aside": str(moved) if moved else None})
    rd.write_results({"runs": runs, "summary": summary})
    render_reports(rd.path, summary, runs, llm.alias)
    note_unfinished(rd.path, summary["unfinished"])
    return summary


def unfinished(runs: dict[str, Any], keys: list[str]) -> dict[str, list[str]]:
    """The runs without a result, by why: endpoint, budget, harness, or never started."""
    out: dict[str, list[str]] = {}
    for key in keys:
        status = runs[key].get("status") if key in runs else "not_run"
        if status in UNFINISHED:
            out.setdefault(status, []).append(key)
    return out


def unfinished_text(unfinished: dict[str, list[str]]) -> str:
    parts = [f"{len(keys)} run(s) {UNFINISHED[why]} ({', '.join(keys[:3])}{', ...' if len(keys) > 3 else ''})"
             for why, keys in unfinished.items()]
    return ("Incomplete: " + "; ".join(parts) + ". Their problems count as not solved here; re-run the same "
            "command to resume them.")


def note_unfinished(out: Path, unfinished: dict[str, list[str]]) -> None:
    """Put the incomplete runs at the top of report.md and report.html, so no one reads the score alone."""
    if not unfinished:
        return
    text = unfinished_text(unfinished)
    md = out / "report.md"
    head, _, rest = md.read_text(encoding="utf-8").partition("\n\n")
    md.write_text(f"{head}\n\n**{text}**\n\n{rest}", encoding="utf-8")
    page = out / "report.html"
    doc = page.read_text(encoding="utf-8")
    note = f"<p style='color:#b00020'><b>{html.escape(text)}</b></p>"
    page.write_text(doc.replace("</h1>", "</h1>" + note, 1) if "</h1>" in doc else note + doc, encoding="utf-8")
