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

from triforge.core import proc
from triforge.cpagent import warm
from triforge.cpagent.dataset import DatasetError, Problem
from triforge.cpagent.output import OutputError, key_errors, parse_solution
from triforge.cpagent.refmodel import check_plan

HARNESS = Path(__file__).with_name("harness.py")
# Slack over the problem's time limit for interpreter start and cpmpy import (about 0.5 s measured).
START_SLACK_S = 2.0
WARM_SLACK_S = 0.2  # a forked warm child starts in milliseconds


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

    @property
    def proven_optimal(self) -> bool:
        return self.ok and self.status == "OPTIMAL"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RefResult:
        return cls(**d)


def source_sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def harness_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def run_reference(problem: Problem, instance: int = 0, *, timeout_s: float | None = None,
                  python: str = sys.executable, nice: int = 0) -> RefResult:
    """Run the reference model on one instance; ok when it printed a valid solution within its budget.

    `nice` lowers the run's CPU priority (the runner uses it to let long-budget references go first).
    """
    source = problem.instance_source(instance)
    sha = source_sha(source)
    budget = timeout_s if timeout_s is not None else problem.time_limit_s
    try:
        model_name = check_plan(source).model_name
    except DatasetError:
        model_name = "model"  # the run itself still decides; only the solver status needs the name
    with tempfile.TemporaryDirectory(prefix="cpbench-ref-") as tmp:
        job, res = Path(tmp, "job.json"), Path(tmp, "result.json")
        job.write_text(json.dumps({"source": source, "model_name": model_name}))
        if warm.enabled() and python == sys.executable:
            w = warm.pool(HARNESS).run("ref", job, res, budget + WARM_SLACK_S, nice)
            timed_out, seconds, stdout, stderr = w.timed_out, w.seconds, w.stdout, w.stderr
        else:
            r = proc.run([python, str(HARNESS), "ref", str(job), str(res)], timeout=budget + START_SLACK_S,
                         cwd=tmp, env=harness_env())
            timed_out, seconds, stdout, stderr = r.timed_out, r.duration_s, r.stdout, r.stderr
        meta = json.loads(res.read_text()) if res.is_file() else None

    def fail(status: str, reason: str) -> RefResult:
        return RefResult(problem.id, instance, False, status, None, None, seconds, reason, sha)

    if timed_out:
        return fail("timeout", f"no result within {budget:g} s")
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
    return RefResult(problem.id, instance, True, status, solution, meta.get("objective"), seconds, "", sha)


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
        return res if res.source_sha == source_sha(problem.instance_source(instance)) else None

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


def all_tasks(problems: Iterable[Problem]) -> list[tuple[Problem, int]]:
    return [(p, k) for p in problems for k in range(p.n_instances)]


def run_references(
    problems: Iterable[Problem],
    *,
    jobs: int = 2,
    on_done: Callable[[RefResult], None] | None = None,
    cache: RefCache | None = None,
) -> list[RefResult]:
    """Every reference on every instance, `jobs` at a time, longest budgets first; results in task order."""
    tasks = all_tasks(problems)
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i][0].time_limit_s)
    longest = max((p.time_limit_s for p, _ in tasks), default=0.0)
    results: list[RefResult | None] = [None] * len(tasks)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        # Long-budget references (a `# Timeout:` above the rest) start first and keep full CPU priority;
        # the short ones run beside them at lower priority instead of halving their share of the cores.
        futs = {pool.submit(run_reference, *tasks[i], nice=0 if tasks[i][0].time_limit_s >= longest else 10): i
                for i in order}
        for fut in as_completed(futs):
            p, k = tasks[futs[fut]]
            try:
                res = fut.result()
            except Exception as e:  # noqa: BLE001 - one broken problem must not end the whole run
                res = RefResult(p.id, k, False, "error", None, None, 0.0, f"harness: {type(e).__name__}: {e}")
            results[futs[fut]] = res
            if cache is not None:
                cache.put(res)
            if on_done is not None:
                on_done(res)
    return [r for r in results if r is not None]
