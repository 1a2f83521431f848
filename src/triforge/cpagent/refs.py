"""Reference runner: each reference model on each instance, in its own subprocess with its own time budget."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
import tomllib
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
from triforge.cpagent.ref_cache import ResultStore, run_key

REF_JOBS = Path(__file__).with_name("ref_jobs.py")
DURATIONS = Path(__file__).with_name("ref_durations.toml")
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
    key: str = ""  # the content hash of the run's inputs (ref_cache.run_key); what the cache files it under
    cached: bool = False  # read from the cache, not run now

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
    key = run_key(source, budget, workers)
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
        return RefResult(problem.id, instance, False, status, None, None, seconds, reason, sha, expected, key)

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
                     sha, expected, key)


def default_cache_dir() -> Path:
    home = os.environ.get("TRIFORGE_HOME")
    base = Path(home) / "cache" if home else Path.home() / ".cache" / "triforge"
    return base / "cpbench-refs"


class RefCache:
    """Reference results on disk, keyed by content (`ref_cache.run_key`: the instance's source, budget,
    workers, solver versions and grading code); an entry that does not match is a miss, never a verdict.

    Failures are kept too (a reference that timed out once is not re-run on every grading).
    """

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or default_cache_dir()
        self._store = ResultStore(self.folder)

    def _key(self, problem: Problem, instance: int) -> str:
        return run_key(problem.instance_source(instance), ref_budget(problem, instance), solver_workers())

    def get(self, problem: Problem, instance: int) -> RefResult | None:
        data = self._store.get(problem.id, instance, self._key(problem, instance))
        if data is None:
            return None
        try:
            return RefResult.from_json(data)
        except TypeError:
            return None

    def last_duration(self, problem_id: str, instance: int) -> float | None:
        """The duration of the last run stored for this instance, whatever its inputs (for ordering only)."""
        return self._store.last_duration(problem_id, instance)

    def put(self, result: RefResult) -> None:
        """Store `result` under the key of the inputs it was run with (a result without one is not kept)."""
        if result.key and not result.cached:
            self._store.put(result.problem_id, result.instance, result.key, {**result.to_json(), "cached": False})


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


def recorded_seconds(problem: Problem, instance: int, cache: RefCache | None = None) -> float:
    """How long this reference run is expected to take: its last run here (the cache, whatever its key), else
    the durations recorded in ref_durations.toml, else its budget."""
    if cache is not None and (seen := cache.last_duration(problem.id, instance)) is not None:
        return seen
    if problem.id in _recorded():  # a problem of the recorded run: an instance not listed took under 5 s
        return float(_recorded()[problem.id].get(str(instance), 1.0))
    return ref_budget(problem, instance)  # unknown here: as long as it may take


@functools.cache
def _recorded() -> dict[str, dict[str, float]]:
    try:
        return tomllib.loads(DURATIONS.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def default_jobs() -> int:
    """References run at a time: one per core this process may use."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def dominating(results: list[RefResult], n: int = 5) -> str:
    """One line naming the runs that took most of the time (of a run that was not all cached)."""
    ran = [r for r in results if not r.cached]
    total = sum(r.duration_s for r in ran)
    if not ran or total <= 0:
        return ""
    top = sorted(ran, key=lambda r: -r.duration_s)[:n]
    share = sum(r.duration_s for r in top) / total
    parts = ", ".join(f"{r.problem_id}#{r.instance} {r.duration_s:.0f} s ({r.status})" for r in top)
    return f"the {len(top)} longest of {len(ran)} runs took {share:.0%} of their {total:.0f} s: {parts}"


def run_references(
    problems: Iterable[Problem],
    *,
    jobs: int = 2,
    on_done: Callable[[RefResult], None] | None = None,
    cache: RefCache | None = None,
    beyond_reach: bool = False,
    reuse: bool = True,
) -> list[RefResult]:
    """Every reference on every instance, `jobs` at a time, longest first; results in task order.

    With a `cache`, a run whose inputs are unchanged (`ref_cache.run_key`) is not run again (`reuse`; its
    result comes back with `cached` set); the others run longest first by `recorded_seconds`, so that the
    longest ones do not start last. Instances listed as beyond reach (ref_budgets.toml) are left out unless
    `beyond_reach`.
    """
    tasks = all_tasks(problems, beyond_reach=beyond_reach)
    results: list[RefResult | None] = [None] * len(tasks)
    todo = []
    for i, (p, k) in enumerate(tasks):
        hit = cache.get(p, k) if cache is not None and reuse else None
        if hit is not None:
            hit.cached = True
            results[i] = hit
            if on_done is not None:
                on_done(hit)
        else:
            todo.append(i)
    budgets = {i: ref_budget(*tasks[i]) for i in todo}
    expected = {i: recorded_seconds(*tasks[i], cache) for i in todo}
    order = sorted(todo, key=lambda i: (-expected[i], -budgets[i]))
    longest = max(budgets.values(), default=0.0)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        # Long-budget references (a `# Timeout:` above the rest) keep full CPU priority; the short ones run
        # beside them at lower priority instead of halving their share of the cores.
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
