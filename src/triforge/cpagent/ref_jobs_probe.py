"""Subprocess side of the dynamic check: grade by what the reference prints, not by how it spells it.

Used when the output code of a reference cannot be read statically (`refmodel.check_plan` fails). The reference
runs unchanged until its first `solve()`; that call is intercepted. Probes: the process forks, each child gives
every model variable a random value from its domain, pretends the solve succeeded and lets the program print;
matching the printed leaves against the values of the variables, of the objective and of the expressions the
program holds in its namespace tells which expression each leaf prints (exactly, or as `a * e + b`), which leaves
are constants and which cannot be told. Checks: per submitted candidate a child fixes the mapped leaves, solves
(with the optimum, or proving one), lets the program print its solution, and the parent compares that output
with the candidate (a forward check, so a wrong reading can never accept a wrong answer). A key that could not be
read is `incorrect` only when its printed value is fixed by the other keys (randomising the other variables does
not change it); otherwise the check reports that it cannot decide.

Imported by ref_jobs.py from the same folder; it imports no triforge module.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import sys
import time
from typing import Any

from fork_report import read_report, write_report  # beside this file, like the harness
from probe_reading import (
    fixing,
    flatten,
    index_lists,
    is_array,
    leaves,
    parse_printed,
    plain,
    random_value,
    read_leaves,
    same,
    sequences,
    structures,
    value_at,
)
from ref_jobs_explain import explain_unsat, record_lines  # beside this file, like the harness

REF_FILE = "<reference>"
N_PROBES = 24  # at most; the first N_FIRST suffice where they read every printed leaf beyond doubt
N_FIRST = 8
N_DETERMINE = 8
_SAT = ("FEASIBLE", "OPTIMAL")


class _Stop(BaseException):  # noqa: N818 - not an error: a reference's `except Exception` must not catch it
    """Ends the parent's run of the reference once every child has reported."""


class _Resume(BaseException):  # noqa: N818
    """Raised in a forked child: unwinds to the intercepted `solve()`, which returns `value` to the program."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _settled(plan: dict[tuple, tuple], outputs: list[dict[str, Any]]) -> bool:
    """Whether the first probes read every printed leaf beyond reasonable doubt: each leaf read (directly, or
    inside a list of positions), none read as a constant, and each read leaf took at least 4 distinct values.
    Otherwise (booleans, small domains, constants) more probes are run: on 8 probes a boolean matches an
    unrelated boolean variable, or looks constant, by chance far too often."""
    lists = [p for p, e in plan.items() if e[0] == "idx"]
    for path, _ in leaves(outputs[0]):
        if any(path[: len(p)] == p for p in lists):
            continue
        entry = plan.get(path)
        if entry is None or entry[0] == "const":
            return False
        if len({json.dumps(value_at(o, path)) for o in outputs}) < 4:
            return False
    return all(len({json.dumps(value_at(o, p)) for o in outputs}) >= 4 for p in lists)


def _status_name(status: Any) -> str:
    return getattr(getattr(status, "exitstatus", None), "name", "UNKNOWN")


class Probe:
    """The state of one dynamic check inside the reference's process."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.fired = False
        self.child: dict[str, Any] | None = None  # set in a forked child: what to report at the end
        self.result: dict[str, Any] = {}
        self.structure: dict[str, frozenset] = {}  # key -> leaf paths, for keys laid out alike on every probe

    # --- interception -------------------------------------------------------------------------------------
    def install(self, cp: Any) -> None:
        record_lines(cp)
        classes = [cp.Model] + [cls for _, cls in cp.SolverLookup.base_solvers()]
        for cls in classes:
            original = cls.__dict__.get("solve")
            if original is None:
                continue

            def solve(obj: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                if self.fired:
                    return _original(obj, *args, **kwargs)
                self.fired = True
                try:
                    return self.on_solve(cp, obj, _original, args, kwargs)
                except _Resume as r:
                    return r.value

            cls.solve = solve

    def _variables(self, cp: Any, obj: Any) -> tuple[list[Any], list[tuple[str, Any]], list[list[Any]]]:
        """The model's variables (in a fixed order), named non-variable expressions held by the program, and
        its one-dimensional sequences of expressions (arrays, and the rows of two-dimensional ones)."""
        from cpmpy.expressions.core import Expression
        from cpmpy.expressions.variables import _NumVarImpl
        from cpmpy.transformations.get_variables import get_variables, get_variables_model

        if isinstance(obj, cp.Model):
            variables = list(get_variables_model(obj))
        else:
            variables = sorted(getattr(obj, "user_vars", ()), key=str)
        seen = {id(v) for v in variables}
        exprs: list[tuple[str, Any]] = []
        arrays: list[list[Any]] = []
        if isinstance(obj, cp.Model) and obj.objective_ is not None:
            exprs.append(("the objective", obj.objective_))
        f = sys._getframe(2)
        while f is not None and len(exprs) < 4000:
            if f.f_code.co_filename == REF_FILE:
                for name, val in list(f.f_locals.items()):
                    items = [(name, val)]
                    if isinstance(val, (list, tuple)) or is_array(val):
                        try:
                            flat = list(flatten(val))
                        except Exception:  # noqa: BLE001 - an odd container is not a candidate
                            flat = []
                        items = [(f"{name}[{i}]", x) for i, x in enumerate(flat[:2000])]
                        if len(arrays) < 500:
                            arrays += sequences(val, Expression)
                    for label, x in items:
                        if isinstance(x, _NumVarImpl):
                            if id(x) not in seen:
                                seen.add(id(x))
                                variables.append(x)
                        elif isinstance(x, Expression):
                            exprs.append((label, x))
                            for v in get_variables(x):
                                if id(v) not in seen:
                                    seen.add(id(v))
                                    variables.append(v)
            f = f.f_back
        return variables, exprs, arrays

    def on_solve(self, cp: Any, obj: Any, original: Any, args: tuple, kwargs: dict) -> Any:
        if (worse := self.job.get("worse_than")) is not None:  # a sub-optimal solution, printed by the program
            objective = obj.objective_
            obj += objective > worse if obj.objective_is_min else objective < worse
            return original(obj, *args, **kwargs)
        variables, exprs, arrays = self._variables(cp, obj)
        rng = random.Random(1234)
        probes: list[list[Any]] = []
        outputs: list[dict[str, Any] | None] = []
        errors: list[str] = []
        for n in (N_FIRST, N_PROBES - N_FIRST):  # more probes only where the first ones leave leaves unread
            for _ in range(n):
                assignment = [random_value(v, rng) for v in variables]
                rep = self._fork(lambda a=assignment: self._enter_probe(cp, obj, variables, a), 5.0)
                out = parse_printed(rep.get("stdout", "")) if rep.get("done") else None
                if out is None:
                    errors.append(rep.get("error") or "no JSON object printed")
                probes.append(assignment)
                outputs.append(out)
            ok = [i for i, o in enumerate(outputs) if o is not None]
            if len(ok) < 4:
                continue
            kept = [outputs[i] for i in ok]
            plan = read_leaves(variables, exprs, [probes[i] for i in ok], kept)  # type: ignore[arg-type]
            plan.update(index_lists(variables, arrays, [probes[i] for i in ok], kept, plan))  # type: ignore[arg-type]
            if _settled(plan, kept):  # type: ignore[arg-type]
                break
        self.result["probes"] = {"run": len(probes), "printed": len(ok)}
        if len(ok) < 4:
            self.result["error"] = (f"the reference's output could not be read: {len(probes) - len(ok)} of "
                                    f"{len(probes)} probes printed no JSON object ({errors[-1][:200]})")
            raise _Stop
        self.result["sample"] = kept[0]
        self.structure = structures(kept)  # type: ignore[arg-type]
        self.result["mapped"] = sorted({str(p[0]) for p, _ in plan.items()})
        results = []
        for cand in self.job.get("candidates", []):
            results.append(self._check(cp, obj, original, variables, plan, cand))
        self.result["results"] = results
        raise _Stop

    # --- probing --------------------------------------------------------------------------------------------
    def _enter_probe(self, cp: Any, obj: Any, variables: list[Any], assignment: list[Any]) -> Any:
        for v, x in zip(variables, assignment, strict=True):
            v._value = x
        _set_status(obj, "OPTIMAL")
        return True


    # --- checking -------------------------------------------------------------------------------------------
    def _check(self, cp: Any, obj: Any, original: Any, variables: list[Any], plan: dict[tuple, tuple],
               cand: dict[str, Any]) -> dict[str, Any]:
        values = cand["values"]
        read = fixing(plan, self.structure, values)
        if isinstance(read, str):
            return {"status": "UNSATISFIABLE", "reason": read}
        fix, fixed_vars, unread = read
        free = [v for v in variables if id(v) not in fixed_vars] if unread else []
        limit = self.job.get("time_limit")
        rep = self._fork(lambda: self._enter_check(cp, obj, original, fix, cand["solver"], free), _budget(limit))
        if not rep.get("done") and "status" not in rep:
            return {"status": "CHECK_ERROR", "reason": f"checker: {rep.get('error') or 'no result'}"}
        out = {k: rep[k] for k in ("status", "objective", "reason", "better", "better_objective") if k in rep}
        if unread:
            out["unread"] = sorted(unread)
        if out.get("status") not in _SAT or rep.get("not_optimal"):
            return out
        printed = parse_printed(rep.get("stdout", ""))
        if printed is None:
            return {"status": "CHECK_ERROR", "reason": "the reference printed no JSON object for the solution found "
                    f"with these values ({rep.get('error') or 'no output'})"}
        for key in values:
            if same(printed.get(key), values[key]):
                continue
            if key in unread:
                variants = [parse_printed(s) for s in rep.get("variants", [])]
                if variants and all(v is not None and same(v.get(key), printed.get(key)) for v in variants):
                    return {"status": "UNSATISFIABLE", "reason": f"key {key!r}: with the other keys' values the "
                            f"program prints {json.dumps(printed.get(key))[:80]} there"}
                return {"status": "CHECK_ERROR", "reason": f"key {key!r}: cannot tell which model expression the "
                        "reference prints there (its value varies in a way no single variable explains)"}
            return {"status": "CHECK_ERROR", "reason": f"key {key!r}: the reference printed "
                    f"{json.dumps(printed.get(key))[:80]} for the values it was given (reading of its output failed)"}
        return out

    def _enter_check(self, cp: Any, obj: Any, original: Any, fix: list[Any], solver: str, free: list[Any]) -> Any:
        limit = self.job.get("time_limit")
        optimum = self.job.get("optimum")
        rep = self.child
        assert rep is not None
        if not isinstance(obj, cp.Model):  # a solver object the reference built itself: its backend decides
            obj += fix
            ok = original(obj, time_limit=limit) if limit else original(obj)
            rep["status"] = _status_name(obj.status())
            if ok and obj.has_objective():
                rep["objective"] = plain(obj.objective_value())
            return self._after(obj, ok, free)
        cons = list(obj.constraints) + fix
        objective = obj.objective_

        def solve(extra: list[Any], with_objective: bool = False) -> str:
            m = cp.Model(cons + extra)
            if with_objective:
                m.objective(objective, minimize=obj.objective_is_min)
            s = cp.SolverLookup.get(solver, m)
            s.solve(time_limit=limit) if limit else s.solve()
            return _status_name(s.status())

        if objective is None:
            status = solve([])
        elif optimum is not None:
            status = solve([objective == optimum])
            if status not in _SAT:
                status = solve([], with_objective=True)
                if status in _SAT:
                    rep["not_optimal"] = True
                    rep["objective"] = plain(objective.value())
        else:
            status = solve([], with_objective=True)
            if status in _SAT:
                saved = [(v, v._value) for v in _vars_of(cons, objective)]
                value = objective.value()
                better = objective < value if obj.objective_is_min else objective > value
                s = cp.SolverLookup.get("ortools", cp.Model(list(obj.constraints) + [better]))
                s.solve(time_limit=limit) if limit else s.solve()
                rep["better"] = _status_name(s.status())
                if rep["better"] in _SAT:
                    rep["better_objective"] = plain(objective.value())
                for v, x in saved:
                    v._value = x
        rep["status"] = status
        if status == "UNSATISFIABLE":
            rep["reason"] = explain_unsat(cp, obj, fix, solver, limit, self.job.get("source", ""))
        if status not in _SAT or rep.get("not_optimal"):
            self._finish()
        if objective is not None:
            rep["objective"] = plain(objective.value())
        _set_status(obj, status)
        return self._after(obj, True, free)

    def _after(self, obj: Any, ok: Any, free: list[Any]) -> Any:
        """Before the program prints the solution found: print it with the free variables randomised too."""
        if ok and free and self.child is not None:
            rng = random.Random(99)
            rep = self.child
            kept = [(v, v._value) for v in free]
            variants = []
            for _ in range(N_DETERMINE):
                self.child = None
                r = self._fork(lambda: [setattr(v, "_value", random_value(v, rng)) for v in free] and True, 5.0)
                variants.append(r.get("stdout", "") if r.get("done") else "")
            self.child = rep
            rep["variants"] = variants
            for v, x in kept:
                v._value = x
        return ok

    # --- children -------------------------------------------------------------------------------------------
    def _fork(self, enter: Any, timeout: float) -> dict[str, Any]:
        """Run the rest of the reference in a forked child that first calls `enter()` (its value is what
        `solve()` returns there); the child's report (stdout, `done`, what `enter` recorded) comes back through
        a pipe, so no file is written (the harness may run where it can write nothing but its result)."""
        r, w = os.pipe()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            self.child = {"fd": w}
            self.child_out = io.StringIO()
            sys.stdout = self.child_out
            try:
                value = enter()
            except _Resume:
                raise
            except BaseException as e:  # noqa: BLE001 - report it; the parent decides
                self.child["error"] = f"{type(e).__name__}: {e}"
                self._finish()
            raise _Resume(value)
        os.close(w)
        return read_report(pid, r, timeout)

    def _finish(self, error: str | None = None) -> None:
        """In a child: write the report to the parent and leave at once."""
        rep = self.child or {}
        if error and "error" not in rep:
            rep["error"] = error
        rep["stdout"] = getattr(self, "child_out", io.StringIO()).getvalue()
        rep.setdefault("done", error is None and "error" not in rep)
        write_report(rep.pop("fd", None), rep)


def _vars_of(cons: list[Any], objective: Any) -> list[Any]:
    from cpmpy.transformations.get_variables import get_variables

    return list(get_variables(cons + [objective]))


def _set_status(obj: Any, name: str) -> None:
    from cpmpy.solvers.solver_interface import ExitStatus, SolverStatus

    st = SolverStatus("triforge-check")
    st.exitstatus = getattr(ExitStatus, name, ExitStatus.UNKNOWN)
    st.runtime = 0.0
    obj.cpm_status = st


def _budget(limit: float | None) -> float:
    return 3 * (limit or 60.0) + (2 + N_DETERMINE) * 5.0


def run_probe(job: dict[str, Any]) -> dict[str, Any]:
    """The dynamic check of `job['source']`: {"results" (one per candidate), "sample", "probes", ...}."""
    import cpmpy as cp

    probe = Probe(job)
    probe.install(cp)
    ns: dict[str, Any] = {"__name__": "__main__"}
    t0 = time.perf_counter()
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(job["source"], REF_FILE, "exec"), ns)
    except _Stop:
        pass
    except BaseException as e:  # noqa: BLE001 - in a child the program's own error is its report
        if probe.child is not None:
            probe._finish(f"{type(e).__name__}: {e}")
        if not probe.fired:
            return {"error": f"the reference failed before solving: {type(e).__name__}: {e}"}
        raise
    if probe.child is not None:
        probe._finish()
    if not probe.fired:
        return {"error": "the reference never called solve()"}
    if job.get("worse_than") is not None:
        return {"stdout": printed.getvalue()}
    probe.result["probe_s"] = time.perf_counter() - t0
    return probe.result
