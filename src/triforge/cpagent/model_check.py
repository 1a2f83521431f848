"""The model-level check: the submitted model's solutions, not only the one it printed, checked by the reference.

Soundness: the program runs again in the same isolation as its graded run, with its `solve()` observed
(model_jobs.py); the distinct solutions of the model it solves, projected on what it prints (for an
objective: its optimal ones), are each graded like a printed solution. One the reference rejects makes the
verdict `incorrect`, with that solution and the reference's reason. Completeness (reported, not a failure):
the reference's solution forced into the submitted model; a model that rules it out is `over-constrained`.
Both are bounded (a solution limit and a time limit per check), and the result says what was covered.
"""

from __future__ import annotations

import ast
import json
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triforge.confine.run import run_isolated
from triforge.core import pyparse
from triforge.cpagent import warm
from triforge.cpagent.dataset import Problem
from triforge.cpagent.output import OutputError, parse_solution
from triforge.cpagent.program_run import Limits, policy_for
from triforge.cpagent.refs import REF_JOBS, RefCache, RefResult

if TYPE_CHECKING:
    from triforge.cpagent.grader import Verdict

MODEL_JOBS = Path(__file__).with_name("model_jobs.py")
MODES = ("off", "sample", "full")
DEFAULT_MODE = "sample"
# (solutions, seconds of enumeration) per check; `sample` checks the first instance graded, `full` every one.
BOUNDS = {"sample": (10, 10.0), "full": (100, 60.0)}
START_S = 3.0  # interpreter, cpmpy import, forks
# Attributes through which a program reaches a solver's own model: constraints posted there are not seen.
NATIVE = {"ort_model", "ort_solver", "native_model", "xct_solver", "chc_model", "chc_solver", "grb_model",
          "pysat_solver", "z3_solver", "mzn_model", "scip_model", "cplex_model", "gcs"}


@dataclass
class ModelCheck:
    mode: str
    soundness: str = "not_checked"  # sound | unsound | not_checked
    coverage: str = ""  # "all N solutions checked", "first N of at least M checked", "not checked: why"
    solutions_checked: int = 0
    exhaustive: bool = False
    counterexample: dict[str, Any] | None = None
    counter_reason: str = ""
    completeness: str = "not_checked"  # keeps_reference | over-constrained | not_checked
    completeness_note: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_mode(mode: str) -> str:
    from triforge.core.errors import UserError

    if mode not in MODES:
        raise UserError(f"--model-check {mode!r}: expected one of {', '.join(MODES)}")
    return mode


def native_access(source: str) -> str | None:
    """The solver-native attribute the program uses (constraints posted there cannot be captured)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = pyparse.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in NATIVE:
            return node.attr
    return None


def _as_printed(ref: Any, printed: Any) -> Any:
    """The reference's value in the kinds the submission prints (booleans as 0/1 where it prints 0/1)."""
    if isinstance(ref, list) and isinstance(printed, list):
        return [_as_printed(r, p) for r, p in zip(ref, printed, strict=False)] + ref[len(printed):]
    if isinstance(ref, dict) and isinstance(printed, dict):
        return {k: _as_printed(v, printed.get(k)) for k, v in ref.items()}
    if isinstance(ref, bool) and type(printed) is int:
        return int(ref)
    return ref


def run_job(job: dict[str, Any], budget: float, python: str = sys.executable) -> tuple[dict[str, Any] | None, str]:
    """The harness run under the isolation policy and the graded run's memory limit: in a child of the warm
    harness server (ref_jobs.py serve, mode `model`), else a fresh confined interpreter with its rlimits."""
    limits = Limits(wall_s=budget)
    job = {**job, "memory_bytes": limits.memory_bytes}
    with tempfile.TemporaryDirectory(prefix="cpbench-model-") as tmp:
        jp, rp = Path(tmp, "job.json"), Path(tmp, "result.json")
        jp.write_text(json.dumps(job))
        if warm.enabled() and python == sys.executable:
            w = warm.pool(REF_JOBS).run("model", jp, rp, budget)
            timed_out, err = w.timed_out, w.stderr
        else:
            run = run_isolated([python, str(MODEL_JOBS), "model", str(jp), str(rp)], workdir=tmp, timeout=budget,
                               policy=policy_for(python), limits=limits.proc_limits())
            timed_out, err = run.result.timed_out, run.result.stderr
        out = json.loads(rp.read_text()) if rp.is_file() else None
    why = "timed out" if timed_out else f"failed: {(err.strip().splitlines() or ['?'])[-1][:300]}"
    return out, why


def check_model(problem: Problem, instance: int, source: str, printed: dict[str, Any] | None, *, mode: str,
                reference: RefResult | None = None, cache: RefCache | None = None, run_reference: bool = True,
                relax: bool = True, strict_types: bool = False, python: str = sys.executable) -> ModelCheck:
    """The model-level check of `source` (the program as run for `instance`); `printed` is what it printed."""
    from triforge.cpagent.grader import grade_solutions
    from triforge.cpagent.refs import reference_for

    t0 = time.perf_counter()
    mc = ModelCheck(mode)
    cache = cache if cache is not None else RefCache()  # the on-disk default, as grading uses
    limit, seconds = BOUNDS.get(mode, BOUNDS["sample"])
    if (attr := native_access(source)) is not None:
        mc.coverage = f"not checked: the program's model could not be captured (it uses the solver's own `{attr}`)"
        mc.completeness_note = mc.coverage
        return mc
    ref = reference if reference is not None else cache.get(problem, instance)
    if ref is None and run_reference:
        ref = reference_for(problem, instance, cache)
    job: dict[str, Any] = {"source": source, "solution_limit": limit, "time_limit": seconds,
                           "sound_budget": problem.time_limit_s + 2 * seconds + START_S,
                           "complete_budget": 4 * seconds + 60}
    if ref is not None and ref.ok and ref.solution is not None:
        sols = [ref.solution] + (_reference_solutions(problem, instance, limit, seconds, relax, python)
                                 if mode == "full" else [])
        sols = list({json.dumps(x, sort_keys=True): x for x in sols}.values())
        job["candidates"] = [{"values": _as_printed(x, printed or {}), "solver": "ortools"} for x in sols]
        job["optimum"] = ref.objective if problem.is_optimization and ref.proven_optimal else None
    else:
        mc.completeness_note = "not checked: no reference solution at hand"
    job["complete_budget"] += 5 * seconds * (len(job.get("candidates", [])) - 1) / max(limit, 1)
    budget = job["sound_budget"] + (job["complete_budget"] if "candidates" in job else 0) + START_S
    out, why = run_job(job, budget, python)
    if out is None:
        mc.coverage = f"not checked: the program's model could not be captured (the check {why})"
        mc.seconds = time.perf_counter() - t0
        return mc
    _soundness(mc, problem, instance, out.get("soundness") or {}, limit,
               lambda sols: grade_solutions(problem, sols, instance, reference=ref if ref and ref.ok else None,
                                            cache=cache, run_reference=run_reference, relax=relax,
                                            strict_types=strict_types))
    if "completeness" in out:
        _completeness(mc, out["completeness"])
    mc.seconds = time.perf_counter() - t0
    return mc


def _soundness(mc: ModelCheck, problem: Problem, instance: int, res: dict[str, Any], limit: int, grade: Any) -> None:
    if "error" in res:
        mc.coverage = f"not checked: the program's model could not be captured ({res['error']})"
        return
    sols: list[dict[str, Any]] = []
    for text in res.get("outputs", []):
        try:
            sols.append(parse_solution(text))
        except OutputError:
            continue  # printed by the program for a solution of its model, but not a solution object
    unread = len(res.get("outputs", [])) - len(sols) + len(res.get("print_errors", []))
    if not sols:
        mc.coverage = "not checked: the program printed no solution object for the solutions of its model"
        return
    verdicts = grade(sols)
    mc.solutions_checked = sum(v.verdict in ("correct", "incorrect") for v in verdicts)
    bad = next((v for v in verdicts if v.verdict == "incorrect"), None)
    undecided = [v for v in verdicts if v.verdict not in ("correct", "incorrect")]
    mc.exhaustive = bool(res.get("exhausted")) and not res.get("grew") and not unread and not undecided
    n = mc.solutions_checked
    what = "optimal solutions" if res.get("optimum") is not None else "solutions"
    if mc.exhaustive:
        mc.coverage = f"all {n} {what} checked" if n != 1 else f"the one {what[:-1]} checked"
    elif res.get("more") or res.get("stopped") == "solution limit":
        mc.coverage = f"first {n} of at least {n + 1} {what} checked"
    else:
        reason = res.get("stopped") or "not all could be read"
        mc.coverage = f"first {n} {what} checked (stopped: {reason}; more may exist)"
    if undecided:
        mc.coverage += f"; {len(undecided)} could not be decided ({undecided[0].reasons[0][:120] if undecided[0].reasons else '?'})"
    if bad is not None:
        mc.soundness = "unsound"
        mc.counterexample = bad.solution
        mc.counter_reason = bad.reasons[0] if bad.reasons else "the reference rejects it"
    elif n:
        mc.soundness = "sound"


def _reference_solutions(problem: Problem, instance: int, limit: int, seconds: float, relax: bool,
                         python: str) -> list[dict[str, Any]]:
    """Distinct solutions of the reference model (as the problem's text allows: its listed restrictions
    lifted), enumerated and printed by the reference the way a submission's are; [] where that fails."""
    from triforge.cpagent.overconstrained import relax_source

    source = problem.instance_source(instance)
    if relax:
        source, _ = relax_source(problem.id, source)
    job = {"source": source, "solution_limit": limit, "time_limit": seconds,
           "sound_budget": problem.time_limit_s + 2 * seconds + START_S}
    out, _ = run_job(job, job["sound_budget"] + START_S, python)
    sols = []
    for text in ((out or {}).get("soundness") or {}).get("outputs", []):
        try:
            sols.append(parse_solution(text))
        except OutputError:
            continue
    return sols


def _completeness(mc: ModelCheck, res: dict[str, Any]) -> None:
    if "error" in res:
        mc.completeness_note = f"not checked: {res['error'][:200]}"
        return
    results = res.get("results") or []
    if not results:
        mc.completeness_note = "not checked: no result"
        return
    kept = [r for r in results if r.get("status") in ("FEASIBLE", "OPTIMAL")]
    out = [r for r in results if r.get("status") == "UNSATISFIABLE"]
    n = len(results)
    which = "the reference's solution" if n == 1 else f"{len(out)} of {n} reference solutions"
    if out:
        mc.completeness = "over-constrained"
        mc.completeness_note = (f"the submitted model rules out {which}"
                                # the probe's wording names the program it ran "the reference": here, the submission
                                + (f" ({out[0]['reason'].replace('of the reference', 'of the submission')[:200]})"
                                   if out[0].get("reason") else ""))
    elif len(kept) == n:
        mc.completeness = "keeps_reference"
        mc.completeness_note = ("the reference's solution is a solution of the submitted model" if n == 1 else
                                f"all {n} reference solutions checked are solutions of the submitted model")
    else:
        bad = next(r for r in results if r not in kept)
        mc.completeness_note = f"not checked: {(bad.get('reason') or bad.get('status') or '?')[:200]}"


def apply(verdict: Verdict, mc: ModelCheck) -> Verdict:
    """Put the model check's outcome on the verdict: an unsound model makes it `incorrect`."""
    verdict.model_check = mc.to_json()
    if mc.soundness == "unsound" and verdict.verdict == "correct":
        verdict.verdict = "incorrect"
        sol = json.dumps(mc.counterexample, separators=(",", ":"))
        verdict.reasons.append(f"the printed solution is right, but the program's model also admits "
                               f"{sol[:300]}, which the reference rejects: {mc.counter_reason}")
    elif mc.soundness == "not_checked":
        verdict.notes.append(f"model check {mc.coverage}; the verdict rests on the printed solution only")
    if mc.completeness == "over-constrained":
        verdict.notes.append(f"over-constrained: {mc.completeness_note}")
    return verdict


def graded_instances(mode: str, instances: list[int]) -> set[int]:
    """The instances a check runs on: none (`off`), the first graded (`sample`), all (`full`)."""
    if mode == "off" or not instances:
        return set()
    return set(instances) if mode == "full" else {instances[0]}
