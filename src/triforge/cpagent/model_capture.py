"""The capture half of the model-level check (model_jobs.py): a submitted program's solves observed, the model at
its last solve enumerated, each solution printed by the program itself in a forked child. Imports no triforge
module (it runs beside ref_jobs.py in the harness's subprocess).
"""

from __future__ import annotations

import io
import os
import sys
import time
from typing import Any

from fork_report import read_report, write_report  # beside this file, like the harness

SUB_FILE = "<submission>"
MAX_SOLVES = 50
CHILD_S = 5.0
_SAT = ("FEASIBLE", "OPTIMAL")


class _Resume(BaseException):  # noqa: N818 - control flow in a forked child, not an error
    def __init__(self, value: Any) -> None:
        self.value = value


class _Stop(BaseException):  # noqa: N818
    """Ends the parent's run of the program once the capture is done."""


def _status_name(status: Any) -> str:
    return getattr(getattr(status, "exitstatus", None), "name", "UNKNOWN")


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _set_status(obj: Any, name: str) -> None:
    from cpmpy.solvers.solver_interface import ExitStatus, SolverStatus

    st = SolverStatus("triforge-model-check")
    st.exitstatus = getattr(ExitStatus, name, ExitStatus.UNKNOWN)
    st.runtime = 0.0
    obj.cpm_status = st


class Capture:
    """One model-level capture inside the program's process."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.busy = 0  # >0 while the harness itself solves or a solver records: calls pass through
        self.child: dict[str, Any] | None = None  # in a forked child: its report
        self.child_out = io.StringIO()
        self.solves = 0
        self.result: dict[str, Any] = {}

    # --- interception -------------------------------------------------------------------------------------
    def install(self, cp: Any) -> None:
        classes = [cp.Model] + [cls for _, cls in cp.SolverLookup.base_solvers()]
        for cls in classes:
            for meth in ("solve", "solveAll"):
                if (original := cls.__dict__.get(meth)) is not None:
                    setattr(cls, meth, self._solve_wrapper(cp, original, meth))
            if cls is cp.Model:
                continue
            for meth in ("add", "__add__"):
                if (original := cls.__dict__.get(meth)) is not None:
                    setattr(cls, meth, self._record_wrapper(original, "constraints"))
            if (original := cls.__dict__.get("objective")) is not None:
                cls.objective = self._record_wrapper(original, "objective")

    def _solve_wrapper(self, cp: Any, original: Any, meth: str) -> Any:
        def solve(obj: Any, *args: Any, **kwargs: Any) -> Any:
            if self.busy:
                return original(obj, *args, **kwargs)
            try:
                return self.on_solve(cp, obj, original, meth, args, kwargs)
            except _Resume as r:
                return r.value
        return solve

    def _record_wrapper(self, original: Any, what: str) -> Any:
        def record(obj: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.busy:
                if what == "constraints":
                    obj.__dict__.setdefault("_triforge_constraints", []).append(args[0] if args else kwargs)
                else:
                    expr = args[0] if args else kwargs.get("expr")
                    minimize = args[1] if len(args) > 1 else kwargs.get("minimize", True)
                    obj.__dict__["_triforge_objective"] = (expr, bool(minimize))
            self.busy += 1
            try:
                return original(obj, *args, **kwargs)
            finally:
                self.busy -= 1
        return record

    # --- the capture --------------------------------------------------------------------------------------
    def _model_of(self, cp: Any, obj: Any, kwargs: dict[str, Any]) -> tuple[list[Any], Any, bool]:
        if isinstance(obj, cp.Model):
            cons, objective, is_min = list(obj.constraints), obj.objective_, bool(obj.objective_is_min)
        else:
            cons = list(obj.__dict__.get("_triforge_constraints", []))
            objective, is_min = obj.__dict__.get("_triforge_objective", (None, True))
        if kwargs.get("assumptions") is not None:  # literals the solve assumes true are constraints of it
            cons = cons + list(kwargs["assumptions"])
        return cons, objective, is_min

    def on_solve(self, cp: Any, obj: Any, original: Any, meth: str, args: tuple, kwargs: dict) -> Any:
        self.solves += 1
        if self.child is not None:  # in a child given a solution: the program solves again after it
            self.child["another_solve"] = True
            self._finish()
        if self.solves > MAX_SOLVES:
            self.result = {"error": f"the program called solve() more than {MAX_SOLVES} times"}
            raise _Stop
        from cpmpy.transformations.get_variables import get_variables

        cons, objective, is_min = self._model_of(cp, obj, kwargs)
        variables = list(get_variables(cons + ([objective] if objective is not None else [])))
        t0 = time.perf_counter()
        deadline = t0 + float(self.job.get("time_limit", 10.0))
        limit = int(self.job.get("solution_limit", 10))
        solver = self._solver_name(cp, obj, args, kwargs)
        out: dict[str, Any] = {"solve_index": self.solves, "outputs": [], "solver": solver,
                               "has_objective": objective is not None}
        try:
            s, optimum = self._solver_for(cp, cons, objective, is_min, solver, deadline, out)
        except Exception as e:  # noqa: BLE001 - a model the backends refuse is reported, not fatal
            self.result = {"error": f"the captured model could not be solved: {type(e).__name__}: {e}"[:400]}
            raise _Stop from None
        if s is None:  # no (optimal) solution within the limit: if the program solves again, capture there
            return self._pass(obj, original, args, kwargs, out)
        out["optimum"] = optimum
        seen: set[str] = set()
        shown: set[int] = set()
        first = True
        while True:
            left = deadline - time.perf_counter()
            if len(out["outputs"]) >= limit or left <= 0:
                out["stopped"] = "solution limit" if len(out["outputs"]) >= limit else "time limit"
                break
            self.busy += 1
            try:
                ok = s.solve(time_limit=max(0.1, left))
            finally:
                self.busy -= 1
            if not ok and first:  # nothing to give the program here: if it solves again, capture there
                out["objective_status"] = out.get("objective_status") or _status_name(s.status())
                return self._pass(obj, original, args, kwargs, out)
            if not ok:
                out["exhausted"] = _status_name(s.status()) == "UNSATISFIABLE"
                out["stopped"] = "exhausted" if out["exhausted"] else "time limit"
                break
            values = [_plain(v.value()) for v in variables]
            rep = self._fork(lambda vs=values: self._enter(cp, obj, meth, kwargs, variables, vs, optimum), CHILD_S)
            if rep.get("another_solve"):
                if first:
                    return self._pass(obj, original, args, kwargs, None)
                out["grew"] = True  # the program solved again after this solution only: not repeatable
            first = False
            printed = rep.get("stdout", "") if rep.get("done") else None
            if printed is None:
                out.setdefault("print_errors", []).append(rep.get("error") or "no output")
            elif printed not in seen:
                seen.add(printed)
                out["outputs"].append(printed)
            reads = set(rep.get("reads", []))
            if shown and reads - shown:
                out["grew"] = True  # blocks added earlier ignored a variable the output shows
            shown |= reads
            block = [(variables[i], values[i]) for i in sorted(shown)] or list(zip(variables, values, strict=True))
            block = [(v, x) for v, x in block if x is not None]
            if not block:
                out["stopped"] = "exhausted"
                out["exhausted"] = True
                break
            s += cp.any([v != x for v, x in block])
        if out.get("stopped") == "solution limit" and deadline - time.perf_counter() > 0:
            self.busy += 1
            try:
                out["more"] = bool(s.solve(time_limit=max(0.1, deadline - time.perf_counter())))
            finally:
                self.busy -= 1
        out["shown_variables"] = len(shown)
        out["variables"] = len(variables)
        out["seconds"] = time.perf_counter() - t0
        self.result = out
        raise _Stop

    def _pass(self, obj: Any, original: Any, args: tuple, kwargs: dict, out: dict[str, Any] | None) -> Any:
        """Let this solve run for real; the program goes on (and is captured at its next solve)."""
        self.result = {**out, "empty": True} if out is not None else {}
        self.busy += 1
        try:
            return original(obj, *args, **kwargs)
        finally:
            self.busy -= 1

    @staticmethod
    def _solver_name(cp: Any, obj: Any, args: tuple, kwargs: dict) -> str:
        if not isinstance(obj, cp.Model):
            return getattr(obj, "name", "ortools") or "ortools"
        name = kwargs.get("solver", args[0] if args else None)
        return name if isinstance(name, str) else "ortools"

    def _solver_for(self, cp: Any, cons: list[Any], objective: Any, is_min: bool, solver: str, deadline: float,
                    out: dict[str, Any]) -> tuple[Any, Any]:
        """A solver holding the model (its optimal solutions, for an objective): OR-Tools where it takes
        the model, else the program's own backend; None when no (optimal) solution came within the limit."""
        def make(extra: list[Any], with_objective: bool) -> Any:
            m = cp.Model(cons + extra)
            if with_objective:
                m.minimize(objective) if is_min else m.maximize(objective)
            last: Exception | None = None
            self.busy += 1
            try:
                for name in dict.fromkeys(["ortools", solver.split(":")[0]]):
                    try:
                        return cp.SolverLookup.get(name, m)
                    except Exception as e:  # noqa: BLE001 - try the program's own backend next
                        last = e
            finally:
                self.busy -= 1
            assert last is not None
            raise last

        if objective is None:
            return make([], False), None
        s = make([], True)
        self.busy += 1
        try:
            s.solve(time_limit=max(0.1, deadline - time.perf_counter()))
        finally:
            self.busy -= 1
        status = _status_name(s.status())
        out["objective_status"] = status
        if status != "OPTIMAL":
            return None, None
        optimum = _plain(objective.value())
        return make([objective == optimum], False), optimum

    # --- children -----------------------------------------------------------------------------------------
    def _enter(self, cp: Any, obj: Any, meth: str, kwargs: dict, variables: list[Any], values: list[Any],
               optimum: Any) -> Any:
        """In a child: give the program this solution as the result of its solve, and record what it reads."""
        from cpmpy.expressions.variables import _NumVarImpl

        for v, x in zip(variables, values, strict=True):
            v._value = x
        _set_status(obj, "OPTIMAL")
        if optimum is not None and not isinstance(obj, cp.Model):
            obj.objective_value_ = optimum
        index = {id(v): i for i, v in enumerate(variables)}
        reads: set[int] = set()
        original = _NumVarImpl.value

        def value(var: Any) -> Any:
            i = index.get(id(var))
            if i is not None:
                reads.add(i)
            return original(var)

        _NumVarImpl.value = value
        assert self.child is not None
        self.child["reads_set"] = reads
        if meth == "solveAll":
            display = kwargs.get("display")
            if callable(display):
                display()
            elif display is not None:
                obj.print_display(display) if hasattr(obj, "print_display") else print(display)
            return 1
        return True

    def _fork(self, enter: Any, timeout: float) -> dict[str, Any]:
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
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                self._finish(f"{type(e).__name__}: {e}")
            raise _Resume(value)
        os.close(w)
        return read_report(pid, r, timeout)

    def _finish(self, error: str | None = None) -> None:
        """In a child: report to the parent and leave at once."""
        rep = self.child or {}
        if error and "error" not in rep:
            rep["error"] = error
        rep["stdout"] = self.child_out.getvalue()
        rep["reads"] = sorted(rep.pop("reads_set", set()))
        rep.setdefault("done", "error" not in rep and not rep.get("another_solve"))
        write_report(rep.pop("fd", None), rep)


