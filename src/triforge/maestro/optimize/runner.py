"""One optimizer run into a run directory: checks, search, final test evaluation, files.

The run directory holds `config.json` (what fixes the course of the search: a re-run with different
values is refused, naming them), `proposals.jsonl`, `candidates.json`, `curve.json`, `best_program.json`,
`results.json`, `report.md` and `report.html`. A re-run of the same command replays the search from the
start; with the response cache kept in the run directory every call made before is answered from it,
so a run stopped by an endpoint failure, a kill or a stop file resumes to the same result.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triforge.core.budget import Budget
from triforge.core.errors import BudgetExceeded, EndpointError, UserError
from triforge.core.llm import LLM
from triforge.core.rundir import RunDir, write_json_atomic
from triforge.executors.local import current as current_executor
from triforge.maestro.benchmarks.base import Example
from triforge.maestro.evaluate import ExampleResult, Metric
from triforge.maestro.interpreter import Models, Retriever
from triforge.maestro.optimize.budget import BudgetedLLM, keep_for_test, search_budget, spend_summary
from triforge.maestro.optimize.proposals import Proposal, RunLog
from triforge.maestro.optimize.report import report_html, report_md
from triforge.maestro.optimize.rollouts import EndpointDown, Rollouts
from triforge.maestro.optimize.search import SearchOutcome, search
from triforge.maestro.optimize.state import ProgramOptimizeSettings, SearchState
from triforge.maestro.optimize.typecheck import EditError, typecheck
from triforge.maestro.program import Program

OPTIMIZERS = ("maestro", "config-only", "gepa", "mipro")
LABELS = {"maestro": "maestro (graph + config)", "config-only": "maestro, config step only",
          "gepa": "GEPA (the gepa package, through our adapter)", "mipro": "MIPROv2 method (our implementation)"}


@dataclass
class Task:
    """What an optimizer is given: the seed program, the splits, the metric and the retrievers."""

    bench: str
    program: Program
    train: list[Example]
    val: list[Example]
    test: list[Example]
    metric: Metric
    retrievers: dict[str, Retriever] = field(default_factory=dict)


def _ids_hash(examples: list[Example]) -> str:
    return hashlib.sha256("\n".join(e.id for e in examples).encode()).hexdigest()[:16]


def _final_test(rollouts: Rollouts, program: Program, examples: list[Example], which: str,
                on_test: Callable[[str, ExampleResult | None], None] | None) -> tuple[list[ExampleResult], str | None]:
    """One program on the test split, telling `on_test` of each result as it comes; the results, and why
    the evaluation stopped before its end (the call cap) or None."""
    if not examples:
        return [], None
    if on_test is not None:
        on_test(which, None)
    before, told = rollouts.on_result, {}

    def tell(r: ExampleResult) -> None:
        told[r.example_id] = r
        if on_test is not None:
            on_test(which, r)

    rollouts.on_result = tell
    try:
        results = rollouts.run(program, examples, "test")
    except BudgetExceeded as e:  # the results that came before the cap are kept; the report says so
        return list(told.values()), str(e)
    finally:
        rollouts.on_result = before
    for r in results:  # known already (the best program is the seed, or a resumed run): counted as done
        if r.example_id not in told:
            tell(r)
    return results, None


def fingerprint(optimizer: str, task: Task, settings: ProgramOptimizeSettings, models: dict[str, Any]) -> dict[str, Any]:
    return {"optimizer": optimizer, "bench": task.bench, "program_hash": task.program.hash,
            "train": _ids_hash(task.train), "val": _ids_hash(task.val), "test": _ids_hash(task.test),
            "settings": settings.fingerprint(), "models": models}


def _check_resume(rd: RunDir, fp: dict[str, Any]) -> None:
    path = rd.path / "config.json"
    if not path.is_file():
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8")).get("fingerprint", {})
    except json.JSONDecodeError:
        return
    diff = sorted(k for k in set(old) | set(fp) if old.get(k) != fp.get(k))
    if diff:
        raise UserError(f"run directory {rd.path} holds a different run ({', '.join(diff)} differ); use a new --out "
                        "or the same options to resume")


def run_search(optimizer: str, task: Task, rollouts: Rollouts, ledger: Budget, reflection: BudgetedLLM,
               settings: ProgramOptimizeSettings, log: RunLog,
               on_proposal: Callable[[Proposal, SearchState], None] | None) -> SearchOutcome:
    if optimizer in ("maestro", "config-only"):
        settings.graph_step = optimizer == "maestro"
        return search(task.program, task.train, task.val, rollouts, ledger, reflection, settings, log, on_proposal)
    if optimizer == "mipro":
        from triforge.maestro.optimize.mipro import search_mipro

        return search_mipro(task, rollouts, ledger, reflection, settings, log)
    from triforge.maestro.optimize.gepa_adapter import search_gepa

    return search_gepa(task, rollouts, ledger, reflection, settings, log)


def optimize(optimizer: str, task: Task, models: Models, reflection: LLM, settings: ProgramOptimizeSettings,
             out: str | Path | None, *, describe_models: dict[str, Any] | None = None, jobs: int = 8,
             on_proposal: Callable[[Proposal, SearchState], None] | None = None,
             progress: Callable[[Proposal, Budget, float], None] | None = None,
             on_test: Callable[[str, ExampleResult | None], None] | None = None) -> dict[str, Any]:
    """Run one optimizer; `progress(proposal, ledger, best validation score)` is called for every logged proposal,
    `on_test(which, result)` during the final test evaluation (`which`: seed or best; None when it starts)."""
    if optimizer not in OPTIMIZERS:
        raise UserError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    try:
        typecheck(task.program)
    except EditError as e:
        raise UserError(f"program {task.program.name!r} fails its type check: {e}") from None
    rd = RunDir(out) if out is not None else None
    fp = fingerprint(optimizer, task, settings, describe_models or {})
    if rd is not None:
        _check_resume(rd, fp)
        rd.write_config({"fingerprint": fp, "budget": settings.budget, "max_calls": settings.max_calls,
                         "patience": settings.patience, "max_wall_s": settings.max_wall_s})
    t0 = time.perf_counter()
    # one owner for the ledger: rollouts on other processes or hosts reserve their calls with it
    ledger: Budget = current_executor().host(search_budget(settings.budget, settings.max_calls))
    rollouts = Rollouts(task.metric, models, ledger, retrievers=task.retrievers, jobs=jobs)
    rollouts.test_rollouts = 2 * len(task.test)  # the seed and the best program
    keep_for_test(ledger, rollouts.test_rollouts)
    refl = BudgetedLLM(reflection, ledger, "reflection")
    log = RunLog(rd.path if rd else None)
    if progress is not None:
        log.on_add = lambda prop: progress(prop, ledger, log.best())
    try:
        outcome = run_search(optimizer, task, rollouts, ledger, refl, settings, log, on_proposal)
    except EndpointError as e:
        if isinstance(e, EndpointDown):
            raise
        raise EndpointDown(f"{e}; re-run the same command to resume from the response cache") from e
    search_calls = ledger.spent().calls
    ledger.keep("calls", 0)  # what was kept back is the final test evaluation's, under the same cap
    test_seed, seed_stop = _final_test(rollouts, task.program, task.test, "seed", on_test)
    test_best, best_stop = _final_test(rollouts, outcome.best, task.test, "best", on_test)
    spent = ledger.spent()
    summary: dict[str, Any] = {
        "optimizer": optimizer, "optimizer_label": LABELS[optimizer], "bench": task.bench,
        "program": task.program.name, "seed_hash": task.program.hash, "best_hash": outcome.best.hash,
        "best_val": outcome.best_val, "stop_reason": outcome.stop_reason, "budget": settings.budget,
        "max_calls": settings.max_calls, "seed": settings.seed, "n_train": len(task.train),
        "n_val": len(task.val), "n_test": len(task.test),
        "test_seed": _mean(test_seed), "test_best": _mean(test_best), "spent": spend_summary(spent),
        "search_calls": search_calls, "test_calls": spent.calls - search_calls,
        "n_test_seed": len(test_seed), "n_test_best": len(test_best), "test_stop": seed_stop or best_stop,
        "proposals": len(log.proposals), "accepted": sum(p.child_id is not None for p in log.proposals),
        "wall_s": time.perf_counter() - t0, **outcome.extra,
    }
    if rd is not None:
        outcome.best.save(rd.path / "best_program.json")
        if outcome.pool is not None:
            write_json_atomic(rd.path / "candidates.json", [c.summary() for c in outcome.pool.candidates])
        write_json_atomic(rd.path / "curve.json", log.curve)
        rd.write_results({"summary": summary, "test": {
            "seed": [{"id": r.example_id, "score": r.score} for r in test_seed],
            "best": [{"id": r.example_id, "score": r.score} for r in test_best]}})
        rd.write_report(report_md(summary, log.proposals, outcome.best))
        (rd.path / "report.html").write_text(report_html(summary, log.proposals, outcome.best, log.curve),
                                             encoding="utf-8")
    return summary


def _mean(results: list[Any]) -> float:
    return sum(r.score for r in results) / len(results) if results else 0.0
