"""`cpagent bench`: the agent on many problems and seeds in parallel, graded strictly, resumable."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from triforge.core import context
from triforge.core.budget import Budget
from triforge.core.kernel_pool import KernelPool
from triforge.core.llm import LLM
from triforge.core.parallel import pmap
from triforge.core.rundir import RunDir
from triforge.cpagent.agent import CPAgentConfig
from triforge.cpagent.bench_report import render_reports, summarize
from triforge.cpagent.solve import FINAL, solve_task
from triforge.cpagent.task import CPTask


def run_key(task_id: str, seed: int) -> str:
    return f"{task_id}#seed{seed}"


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
) -> dict[str, Any]:
    """Run every (task, seed) not finished yet in `out`, then write results.json, report.md, report.html."""
    rd = RunDir(out)
    config = config or CPAgentConfig()
    state = rd.load_results()
    runs: dict[str, Any] = state.get("runs", {})
    todo = [(t, s) for t in tasks for s in range(seeds) if runs.get(run_key(t.id, s), {}).get("status") not in FINAL]
    rd.write_config({"model": {"alias": llm.alias, **llm.config.model_dump()}, "seeds": seeds, "jobs": jobs,
                     "problems": [t.id for t in tasks], "fresh_check": config.fresh_check})
    lock = threading.Lock()
    pool = KernelPool(size=max(1, min(jobs, 8)), limits=None) if todo else None

    def one(item: tuple[CPTask, int]) -> dict[str, Any]:
        task, seed = item
        cfg = replace(config, sample=seed, temperature=config.temperature if seeds == 1 else
                      (config.temperature if config.temperature is not None else 0.7))
        sandbox = pool.sandbox(timeout=cfg.cell_timeout_s) if pool else None
        try:
            rec = solve_task(task, llm, rd.path / "problems" / task.id / f"seed{seed}", config=cfg,
                             sandbox=sandbox, budget=budget)
        except Exception as e:  # noqa: BLE001 - one problem's failure must not end the benchmark
            rec = {"problem": task.id, "status": "harness_error", "message": f"{type(e).__name__}: {e}",
                   "grade": {"status": "harness_error", "reasons": [str(e)[:300]]}}
        finally:
            if sandbox is not None:
                sandbox.close()
        rec["seed"] = seed
        with lock:
            runs[run_key(task.id, seed)] = rec
            rd.write_results({"runs": runs})  # after every problem: a crash loses only work in flight
        if on_done:
            on_done(run_key(task.id, seed), rec)
        return rec

    try:
        with context.use(limits=context.EndpointLimits(default_cap=llm.config.max_concurrency)):
            pmap(one, todo, jobs=jobs)
    finally:
        if pool is not None:
            pool.close()
    summary = summarize(runs, [t.id for t in tasks], seeds)
    rd.write_results({"runs": runs, "summary": summary})
    render_reports(rd.path, summary, runs, llm.alias)
    return summary
