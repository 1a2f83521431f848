"""Strict CP-Bench grader: exact keys, exact types and shapes, fix-and-solve feasibility, proven optimality.

Verdicts: `correct`, `incorrect`, `error` (the program crashed, or the check itself failed),
`timeout`, `no_output`. Only `correct` passes.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from triforge.confine import proc
from triforge.core.errors import UserError
from triforge.cpagent import warm
from triforge.cpagent.dataset import DatasetError, Problem
from triforge.cpagent.model_check import apply as apply_model_check
from triforge.cpagent.model_check import check_mode, check_model, graded_instances
from triforge.cpagent.output import (
    OutputError,
    as_template_bools,
    ints_as_bools,
    key_errors,
    parse_solution,
    shape_errors,
)
from triforge.cpagent.overconstrained import bool_or_01_keys, relax_source
from triforge.cpagent.program_run import Limits, run_harness, run_python
from triforge.cpagent.refmodel import check_plan
from triforge.cpagent.refs import REF_JOBS, START_SLACK_S, RefCache, RefResult, reference_for
from triforge.cpagent.submission import prepare, program_for, run_error, syntax_error

VERDICTS = ("correct", "incorrect", "error", "timeout", "no_output")
DEFAULT_SOLVER = "ortools"
_SAT = ("FEASIBLE", "OPTIMAL")


@dataclass
class Verdict:
    problem_id: str
    instance: int
    verdict: str
    reasons: list[str] = field(default_factory=list)
    solution: dict[str, Any] | None = None
    objective: int | float | None = None
    optimum: int | float | None = None
    solver: str = DEFAULT_SOLVER
    notes: list[str] = field(default_factory=list)  # how it was graded, when out of the ordinary
    isolation: str = ""  # how a submitted program was confined ('' for a solution given as JSON)
    run_s: float = 0.0  # running the submitted program
    check_s: float = 0.0  # fix-and-solve
    model_check: dict[str, Any] | None = None  # the model-level check (model_check.py), where it ran

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_candidates(
    problem: Problem,
    instance: int,
    candidates: list[tuple[dict[str, Any], str]],
    *,
    optimum: int | float | None = None,
    relax: bool = True,
    python: str = sys.executable,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Fix each candidate's values in the (relaxed) reference model and solve with the candidate's
    solver, all in one subprocess (candidates are (values, solver) pairs).

    The reference's output code is read statically where every key prints `<expr>.value()` (possibly cast);
    otherwise the check is dynamic (ref_jobs_probe.py: probes find which expression each printed leaf shows).
    Returns one harness result per candidate (`status`, maybe `objective`, `reason`) and notes about
    restrictions that could not be lifted.
    """
    source = problem.instance_source(instance)
    notes: list[str] = []
    if relax:
        source, notes = relax_source(problem.id, source)
    limit = problem.time_limit_s
    base = {"candidates": [{"values": v, "solver": s} for v, s in candidates], "time_limit": limit,
            "optimum": optimum}
    try:
        plan = check_plan(source, problem.output_keys)
    except DatasetError:
        plan = None
    if plan is None:
        mode, job = "probe", {**base, "source": source}
        budget = START_SLACK_S + limit * (1 + 3 * len(candidates)) + 60
    else:
        mode, job = "check", {**base, "prefix": plan.prefix, "model_name": plan.model_name,
                              "key_exprs": plan.key_exprs}
        # Each candidate may need two solves (feasibility, then reaching the optimum).
        budget = START_SLACK_S + limit * (1 + 2 * len(candidates))
    out, why = _harness(mode, job, budget, python)
    if out is None or "error" in out:
        reason = out["error"] if out else f"checker {why}"
        return [{"status": "CHECK_ERROR", "reason": reason} for _ in candidates], notes
    if plan is None:
        notes.append("output read by probing the reference (its output code is not `<expr>.value()` per key)")
    return out["results"], notes


def _harness(mode: str, job: dict[str, Any], budget: float, python: str = sys.executable
             ) -> tuple[dict[str, Any] | None, str]:
    """Run one harness job; its result, or None and why there is none."""
    with tempfile.TemporaryDirectory(prefix=f"cpbench-{mode}-") as tmp:
        jp, rp = Path(tmp, "job.json"), Path(tmp, "result.json")
        jp.write_text(json.dumps(job))
        if warm.enabled() and python == sys.executable:
            w = warm.pool(REF_JOBS).run(mode, jp, rp, budget)
            timed_out, err = w.timed_out, w.stderr
        else:
            r = run_harness(python, REF_JOBS, mode, jp, rp, timeout=budget, workdir=tmp)
            timed_out, err = r.timed_out, r.stderr
        out = json.loads(rp.read_text()) if rp.is_file() else None
    why = "timed out" if timed_out else f"failed: {(err.strip().splitlines() or ['?'])[-1][:300]}"
    return out, why


def _static_errors(problem: Problem, solution: dict[str, Any], template: dict[str, Any] | None,
                   exact_lengths: bool = True) -> list[str]:
    errs = key_errors(solution, problem.output_keys)
    if errs or template is None:
        return errs
    return [e for k in problem.output_keys for e in shape_errors(solution[k], template[k], k, exact_lengths)][:5]


def _normalized(problem: Problem, solution: dict[str, Any], template: dict[str, Any], relax: bool,
                strict_types: bool) -> tuple[dict[str, Any], list[str]]:
    """The solution with 0/1 read as booleans where the reference prints booleans (unless `strict_types`),
    and booleans and 0/1 read as the model's kind for the keys whose text allows either (when relaxing);
    also the keys where an answer relied on 0/1."""
    either = bool_or_01_keys(problem.id) if relax else set()
    out: dict[str, Any] = {}
    relied: list[str] = []
    for k, v in solution.items():
        if k in template and k in either:
            v = as_template_bools(v, template[k])
        elif k in template and not strict_types:
            read = ints_as_bools(v, template[k])
            if _has_bool_01(read, v):
                relied.append(k)
            v = read
        out[k] = v
    return out, relied


def _has_bool_01(read: Any, raw: Any) -> bool:
    """Whether some leaf was an integer 0/1 in `raw` and a boolean in `read`."""
    if isinstance(read, list) and isinstance(raw, list):
        return any(_has_bool_01(a, b) for a, b in zip(read, raw, strict=False))
    if isinstance(read, dict) and isinstance(raw, dict):
        return any(_has_bool_01(read[k], raw[k]) for k in read if k in raw)
    return isinstance(read, bool) and type(raw) is int


def _verdict_from_check(v: Verdict, res: dict[str, Any], problem: Problem, optimum: Any) -> Verdict:
    status = res.get("status")
    if res.get("native_solver"):
        v.solver = f"{res['native_solver']} (the reference posts solver-native constraints)"
    if status == "CHECK_ERROR" or status not in (*_SAT, "UNSATISFIABLE"):
        v.verdict = "error"
        v.reasons.append(res.get("reason") or f"checker could not decide (solver status {status}) "
                         f"within {problem.time_limit_s:g} s")
        return v
    if status == "UNSATISFIABLE":
        v.verdict = "incorrect"
        v.reasons.append(res.get("reason") or "the values violate the problem's constraints")
        return v
    v.objective = res.get("objective")
    if problem.is_optimization and optimum is not None and v.objective != optimum:
        v.verdict = "incorrect"
        v.reasons.append(f"not optimal: objective {v.objective}, proven optimum {optimum} "
                         f"({problem.objective_sense})")
        return v
    if problem.is_optimization and optimum is None:
        better = res.get("better")
        if better in _SAT:
            v.verdict = "incorrect"
            v.reasons.append(f"not optimal: objective {v.objective}, a solution with objective "
                             f"{res.get('better_objective')} exists ({problem.objective_sense})")
            return v
        if better != "UNSATISFIABLE":
            v.verdict = "error"
            v.reasons.append(f"could not prove objective {v.objective} optimal within {problem.time_limit_s:g} s")
            return v
        v.optimum = v.objective
    v.verdict = "correct"
    return v


def derived_template(problem: Problem, instance: int = 0, *, relax: bool = True) -> dict[str, Any]:
    """Shape and kind of each output key read off the reference's expressions: what a solution must look
    like when no reference output is at hand (False stands for a boolean, 0 for an integer). Where the
    output code cannot be read statically, what the reference printed on a probe (ref_jobs_probe.py)."""
    source = problem.instance_source(instance)
    if relax:
        source, _ = relax_source(problem.id, source)
    budget = problem.time_limit_s + START_SLACK_S
    try:
        plan = check_plan(source, problem.output_keys)
    except DatasetError:
        out, why = _harness("probe", {"source": source, "candidates": [], "time_limit": problem.time_limit_s},
                            budget + 60)
        if out is None or "error" in out:
            raise RuntimeError(f"{problem.id}: could not read the model's output shapes: "
                               f"{out['error'] if out else why}") from None
        return out["sample"]
    job = {"prefix": plan.prefix, "model_name": plan.model_name, "key_exprs": plan.key_exprs, "casts": plan.casts}
    out, why = _harness("template", job, budget)
    if out is None:
        raise RuntimeError(f"{problem.id}: could not read the model's output shapes: {why}")
    return out["template"]


def grade_solutions(
    problem: Problem,
    solutions: list[dict[str, Any]],
    instance: int = 0,
    *,
    solver: str | list[str] = DEFAULT_SOLVER,
    reference: RefResult | None = None,
    cache: RefCache | None = None,
    run_reference: bool = True,
    relax: bool = True,
    strict_types: bool = False,
) -> list[Verdict]:
    """Grade parsed solutions (JSON objects) for one instance; the fix-and-solve checks share one subprocess.

    `solver` is one backend for all, or one per solution. The reference result (given, or from `cache`,
    by default the on-disk cache under $TRIFORGE_HOME) supplies the expected shapes and the proven
    optimum; for an optimisation problem without one, or a reference whose output code cannot be read
    statically, the reference is run now (and cached) unless `run_reference` is False. Without a usable
    reference, shapes are read off the model and optimality is proven by showing that nothing better exists.
    Integers 0/1 read as booleans where the reference prints booleans, unless `strict_types`.
    """
    solvers = [solver] * len(solutions) if isinstance(solver, str) else list(solver)
    if len(solvers) != len(solutions):
        raise ValueError("one solver per solution")
    cache = cache if cache is not None else RefCache()
    ref = reference or cache.get(problem, instance)
    static = _static_plan(problem, instance, relax)  # else list lengths are judged by the probing check
    if ref is None and run_reference and (problem.is_optimization or not static):
        # An optimum needs the reference; so do shapes that cannot be read off the model's expressions.
        ref = reference_for(problem, instance, cache)
    verdicts = [Verdict(problem.id, instance, "incorrect", solution=s, solver=sv)
                for s, sv in zip(solutions, solvers, strict=True)]
    notes: list[str] = []
    if ref is not None and ref.ok:
        template = ref.solution
        optimum = ref.objective if problem.is_optimization and ref.proven_optimal else None
    else:
        if ref is not None:
            notes.append(f"reference unavailable ({ref.status}: {ref.reason}); shapes read off the model"
                         + (", optimality proven directly" if problem.is_optimization else ""))
        try:
            template = derived_template(problem, instance, relax=relax)
        except RuntimeError as e:
            for v in verdicts:
                v.verdict, v.reasons, v.notes = "error", [f"the reference cannot be checked: {e}"], notes
            return verdicts
        optimum = None
    to_check: list[tuple[Verdict, dict[str, Any]]] = []
    for v in verdicts:
        v.optimum, v.notes = optimum, list(notes)
        if not isinstance(v.solution, dict):
            v.reasons = ["the solution is not a JSON object"]
            continue
        values, relied = _normalized(problem, v.solution, template, relax, strict_types)
        if errs := _static_errors(problem, values, template, exact_lengths=static):
            v.reasons = errs
            continue
        if relied:
            v.notes.append(f"0/1 read as booleans for {', '.join(relied)} (the reference prints booleans; "
                           "--strict-types refuses this)")
        to_check.append((v, values))
    if to_check:
        t0 = time.perf_counter()
        results, relax_notes = check_candidates(problem, instance, [(vals, v.solver) for v, vals in to_check],
                                                optimum=optimum, relax=relax)
        dt = (time.perf_counter() - t0) / len(to_check)
        for (v, _), res in zip(to_check, results, strict=True):
            v.check_s = dt
            v.notes += relax_notes
            _verdict_from_check(v, res, problem, optimum)
    return verdicts


def _static_plan(problem: Problem, instance: int, relax: bool) -> bool:
    """Whether the reference's output code reads as `<expr>.value()` per key (see refmodel.check_plan)."""
    try:
        source = problem.instance_source(instance)
        check_plan(relax_source(problem.id, source)[0] if relax else source, problem.output_keys)
    except DatasetError:
        return False
    return True


def grade_output(problem: Problem, stdout: str, instance: int = 0, *, solver: str = DEFAULT_SOLVER,
                 reference: RefResult | None = None, cache: RefCache | None = None, run_reference: bool = True,
                 relax: bool = True, strict_types: bool = False) -> Verdict:
    """Grade what a program printed (the whole stdout) for one instance."""
    try:
        solution = parse_solution(stdout)
    except OutputError as e:
        kind = "no_output" if str(e) == "no output" else "incorrect"
        return Verdict(problem.id, instance, kind, [str(e)], solver=solver)
    return grade_solutions(problem, [solution], instance, solver=solver, reference=reference, cache=cache,
                           run_reference=run_reference, relax=relax, strict_types=strict_types)[0]


def _program_for(problem: Problem, source: str, instance: int) -> str | None:
    """The submission with instance data put into its `# Data` block (None where that cannot be done)."""
    return program_for(problem, source, instance)[0]


def grade_program(
    problem: Problem,
    program: str | Path,
    instances: list[int] | None = None,
    *,
    solver: str = DEFAULT_SOLVER,
    cache: RefCache | None = None,
    run_reference: bool = True,
    relax: bool = True,
    strict_types: bool = False,
    python: str = sys.executable,
    model_check: str = "sample",
) -> list[Verdict]:
    """Run a submitted Python program (or read a .json solution) and grade it on each instance asked for.

    A program is run once per instance, with that instance's data put into its `# Data` ... `# End of data`
    block (the instance's assignments replace the ones of the same names; the program's other lines stay;
    without well-formed markers, into its own assignments of those names: submission.prepare), under the
    problem's time limit. Data that cannot be put in is an `error` saying why. `model_check` (off, sample:
    the first instance, full: every instance) checks the model behind a correct printed solution
    (model_check.py).
    """
    path = Path(program)
    if path.is_dir():
        raise UserError(f"{path} is a folder: give the submission's file (a Python program or a .json solution)")
    if not path.is_file():
        raise UserError(f"{path}: no such submission file")
    instances = instances if instances is not None else [0]
    for k in instances:
        if not 0 <= k < problem.n_instances:
            raise UserError(f"{problem.id}: instance {k} out of range (it has {problem.n_instances})")
    text = path.read_text(encoding="utf-8", errors="replace")
    opts = {"solver": solver, "cache": cache, "run_reference": run_reference, "relax": relax,
            "strict_types": strict_types}
    if path.suffix == ".json":
        if len(instances) != 1:
            raise UserError(f"{path}: a .json solution answers one instance; use --instance K")
        return [grade_output(problem, text, instances[0], **opts)]
    if bad := syntax_error(text):
        return [Verdict(problem.id, k, "error", [bad], solver=solver) for k in instances]
    out: list[Verdict] = []
    checked = graded_instances(check_mode(model_check), instances)
    for k in instances:
        src, why, read_notes = prepare(problem, text, k)
        if src is None:
            out.append(Verdict(problem.id, k, "error", [why], solver=solver))
            continue
        limits = Limits(wall_s=problem.time_limit_s)
        res, isolation = run_python(src, limits, python=python)
        if res.returncode != 0 and not res.timed_out:
            v = Verdict(problem.id, k, "error", [run_error(res.stderr, res.returncode, text, src)], solver=solver)
        else:
            v = _program_verdict(problem, k, res, opts)
        v.isolation, v.run_s = isolation, res.duration_s
        v.notes = read_notes + v.notes
        if k in checked and v.correct:
            apply_model_check(v, check_model(problem, k, src, v.solution, mode=model_check, cache=cache,
                                             run_reference=run_reference, relax=relax, strict_types=strict_types,
                                             python=python))
        out.append(v)
    return out


def _program_verdict(problem: Problem, k: int, res: proc.ProcResult, opts: dict[str, Any]) -> Verdict:
    if res.timed_out:
        return Verdict(problem.id, k, "timeout", [f"no result within {problem.time_limit_s:g} s"],
                       solver=opts["solver"])
    if res.stdout_truncated:
        return Verdict(problem.id, k, "incorrect", ["output too long"], solver=opts["solver"])
    return grade_output(problem, res.stdout, k, **opts)
