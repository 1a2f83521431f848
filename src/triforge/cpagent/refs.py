"""Reference runner: each reference model on each instance, in its own subprocess with its own time budget."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from triforge.cpagent import refmodel, warm
from triforge.cpagent.dataset import DatasetError, Problem
from triforge.cpagent.output import OutputError, key_errors, parse_solution
from triforge.cpagent.program_run import run_harness
from triforge.cpagent.ref_budgets import expectation, ref_budget

REF_JOBS = Path(__file__).with_name("ref_jobs.py")
# Slack over the problem's time limit for interpreter start and cpmpy import (about 0.5 s measured).
START_SLACK_S = 2.0
WARM_SLACK_S = 0.2  # a forked warm child starts in milliseconds
DEFAULT_WORKERS = 8  # CP-SAT portfolio for reference runs (see harness._ortools_defaults)


def solver_workers() -> int:
    """CP-SAT workers for a reference's own solve (TRIFORGE_CPBENCH_WORKERS; 0 = OR-Tools' one per core)."""
    raw = os.environ.get("TRIFORGE_CPBENCH_WORKERS", str(DEFAULT_WORKERS))
    try:
        return max(0, int(raw))
    except ValueError:
        raise DatasetError(f"TRIFORGE_CPBENCH_WORKERS={raw!r} is not a whole number") from None


@dataclass
class RefResult:
    problem_id: str
    instance: int
    ok: bool
    status: str  # solver status (OPTIMAL, FEASIBLE, ...), or timeout / error / bad_output
    solution: dict[str, Any] | None
    objective: int | float | None
    duration_s: float
    reason: str = ""
    source_sha: str = ""
    expected: str = ""  # '' (a valid solution), 'no_solution', 'beyond_reach' or 'marginal' (ref_budgets.toml)

    @property
    def proven_optimal(self) -> bool:
        return self.ok and self.status == "OPTIMAL"

    @property
    def as_expected(self) -> bool:
        """A valid solution, or, for an instance listed as having none, a proof that there is none.

        An instance listed as marginal may also run out of time (never crash or print a wrong solution).
        """
        if self.expected == "no_solution":
            return self.status == "UNSATISFIABLE"
        return self.ok or (self.expected == "marginal" and self.status == "timeout")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RefResult:
        return cls(**d)


def source_sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def run_sha(source: str, budget_s: float, workers: int) -> str:
    """Key of a reference run: its source and the settings that change its outcome."""
    return source_sha(f"{source}\n# triforge: budget {budget_s:g} s, {workers} workers")


def run_reference(problem: Problem, instance: int = 0, *, timeout_s: float | None = None,
                  python: str = sys.executable, nice: int = 0) -> RefResult:
    """Run the reference model on one instance; ok when it printed a valid solution within its budget.

    `nice` lowers the run's CPU priority (the runner uses it to let long-budget references go first).
    """
    source = problem.instance_source(instance)
    budget = timeout_s if timeout_s is not None else ref_budget(problem, instance)
    workers = solver_workers()
    sha = run_sha(source, budget, workers)
    model_name = refmodel.model_name(source)  # only the solver status needs it; the run itself decides
    with tempfile.TemporaryDirectory(prefix="cpbench-ref-") as tmp:
        job, res = Path(tmp, "job.json"), Path(tmp, "result.json")
        job.write_text(json.dumps({"source": source, "model_name": model_name, "budget_s": budget,
                                   "workers": workers}))
        if warm.enabled() and python == sys.executable:
            w = warm.pool(REF_JOBS).run("ref", job, res, budget + WARM_SLACK_S, nice)
            timed_out, seconds, stdout, stderr = w.timed_out, w.seconds, w.stdout, w.stderr
        else:
            r = run_harness(python, REF_JOBS, "ref", job, res, timeout=budget + START_SLACK_S, workdir=tmp)
            timed_out, seconds, stdout, stderr = r.timed_out, r.duration_s, r.stdout, r.stderr
        meta = json.loads(res.read_text()) if res.is_file() else None

    expected = expectation(problem.id, instance)

    def fail(status: str, reason: str) -> RefResult:
        if expected == "no_solution":
            reason = "expected (no solution exists)" if status == "UNSATISFIABLE" else \
                f"{reason}; listed as having no solution, which the reference did not prove"
        elif expected == "marginal" and status == "timeout":
            reason = f"{reason}; allowed: listed as marginal on this machine"
        return RefResult(problem.id, instance, False, status, None, None, seconds, reason, sha, expected)

    if timed_out:
        return fail("timeout", f"no result within {budget:g} s")
    if meta is not None and (meta.get("status") == "timeout" or meta.get("solver_limit_s")):
        return fail("timeout", f"no solution within {budget:g} s (solver stopped at {meta.get('solver_limit_s')} s)")
    if meta is None:
        tail = stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        return fail("error", f"crashed: {tail[0][:200]}")
    try:
        solution = parse_solution(stdout)
    except OutputError as e:
        return fail("bad_output", str(e))
    if errs := key_errors(solution, problem.output_keys):
        return fail("bad_output", "; ".join(errs))
    status = meta.get("status", "UNKNOWN")
    if status not in ("OPTIMAL", "FEASIBLE"):
        return fail(status, f"solver status {status}")
    return RefResult(problem.id, instance, True, status, solution, meta.get("objective"), seconds,
                     "listed as having no solution, but the reference found one" if expected == "no_solution" else "",
                     sha, expected)


def default_cache_dir() -> Path:
    home = os.environ.get("TRIFORGE_HOME")
    base = Path(home) / "cache" if home else Path.home() / ".cache" / "triforge"
    return base / "cpbench-refs"


class RefCache:
    """Reference results on disk, keyed by problem, instance and the hash of the instance's source.

    Failures are kept too (a reference that timed out once is not re-run on every grading).
    """

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or default_cache_dir()

    def _path(self, problem_id: str, instance: int) -> Path:
        return self.folder / f"{problem_id}.{instance}.json"

    def get(self, problem: Problem, instance: int) -> RefResult | None:
        p = self._path(problem.id, instance)
        try:
            res = RefResult.from_json(json.loads(p.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        want = run_sha(problem.instance_source(instance), ref_budget(problem, instance), solver_workers())
        return res if res.source_sha == want else None

    def put(self, result: RefResult) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self._path(result.problem_id, result.instance).with_suffix(".tmp")
        tmp.write_text(json.dumps(result.to_json()))
        tmp.replace(self._path(result.problem_id, result.instance))


def reference_for(problem: Problem, instance: int, cache: RefCache | None = None) -> RefResult:
    """The cached reference result, or a fresh run (then cached)."""
    if cache is not None and (hit := cache.get(problem, instance)) is not None:
        return hit
    res = run_reference(problem, instance)
    if cache is not None:
        cache.put(res)
    return res


def all_tasks(problems: Iterable[Problem], *, beyond_reach: bool = True) -> list[tuple[Problem, int]]:
    """Every (problem, instance); without the instances listed as beyond reach unless `beyond_reach`."""
    return [(p, k) for p in problems for k in range(p.n_instances)
            if beyond_reach or expectation(p.id, k) != "beyond_reach"]


def run_references(
    problems: Iterable[Problem],
    *,
    jobs: int = 2,
    on_done: Callable[[RefResult], None] | None = None,
    cache: RefCache | None = None,
    beyond_reach: bool = False,
) -> list[RefResult]:
    """Every reference on every instance, `jobs` at a time, longest budgets first; results in task order.

    Instances listed as beyond reach (ref_budgets.toml) are left out unless `beyond_reach`.
    """
    tasks = all_tasks(problems, beyond_reach=beyond_reach)
    budgets = [ref_budget(p, k) for p, k in tasks]
    order = sorted(range(len(tasks)), key=lambda i: -budgets[i])
    longest = max(budgets, default=0.0)
    results: list[RefResult | None] = [None] * len(tasks)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        # Long-budget references (a `# Timeout:` above the rest) start first and keep full CPU priority;
        # the short ones run beside them at lower priority instead of halving their share of the cores.
        futs = {pool.submit(run_reference, *tasks[i], nice=0 if budgets[i] >= longest else 10): i for i in order}
        for fut in as_completed(futs):
            p, k = tasks[futs[fut]]
            try:
                res = fut.result()
            except Exception as e:  # noqa: BLE001 - one broken problem must not end the whole run
                res = RefResult(p.id, k, False, "error", None, None, 0.0, f"harness: {type(e).__name__}: {e}",
                                expected=expectation(p.id, k))
            results[futs[fut]] = res
            if cache is not None:
                cache.put(res)
            if on_done is not None:
                on_done(res)
    return [r for r in results if r is not None]
