"""Subprocess side of the reference runner and the grader; run as a script, it imports only cpmpy.

    python ref_jobs.py ref JOB.json RESULT.json    run a reference model; its stdout is the reference's output
    python ref_jobs.py check JOB.json RESULT.json  fix submitted values in a reference model and solve
    python ref_jobs.py variant JOB.json RESULT.json  solve the model with extra constraints (tests, tools)
    python ref_jobs.py template JOB.json RESULT.json the shape and kind of each output key

Kept free of triforge imports so that each subprocess starts in the time it takes to import cpmpy.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any


def _status_name(status: Any) -> str:
    return getattr(getattr(status, "exitstatus", None), "name", "UNKNOWN")


def _exec(source: str, ns: dict[str, Any]) -> None:
    exec(compile(source, "<reference>", "exec"), ns)


# Seconds kept between the solver's time limit and the runner's kill: printing and leaving take milliseconds.
SOLVE_MARGIN_S = 1.0


def _ortools_defaults(workers: int | None, deadline: float | None) -> dict[str, Any]:
    """Defaults for a reference's own OR-Tools solve() calls: a portfolio of `workers` and a time limit.

    CP-SAT's default of one worker per core gives a 2-core machine a portfolio of 2, on which some
    references (car sequencing, cmo_2012) search for minutes; the references were written on machines
    with 8 or more workers, so the runner asks for that portfolio whatever the core count. The time
    limit ends the search inside the runner's budget, so that an optimisation reference prints its
    best solution instead of being killed. A reference that sets either itself keeps its own.
    Returns what happened (`limited`: the last solve ended on the injected limit).
    """
    from cpmpy.solvers.ortools import CPM_ortools

    state: dict[str, Any] = {"limited": False, "limit_s": None}
    original = CPM_ortools.solve

    def solve(self: Any, time_limit: float | None = None, *args: Any, **kwargs: Any) -> Any:
        if workers and "num_workers" not in kwargs and "num_search_workers" not in kwargs:
            kwargs["num_workers"] = workers
        injected = time_limit is None and deadline is not None
        if injected:
            time_limit = max(0.5, deadline - time.perf_counter())
            state["limit_s"] = round(time_limit, 1)
        ret = original(self, time_limit, *args, **kwargs)
        state["solver"] = self  # the model's status when the program's own model is not a global
        state["limited"] = injected and _status_name(self.status()) == "UNKNOWN"
        return ret

    CPM_ortools.solve = solve
    return state


def run_ref(job: dict[str, Any]) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "__main__"}
    t0 = time.perf_counter()
    budget = job.get("budget_s")
    state = _ortools_defaults(job.get("workers"), t0 + budget - SOLVE_MARGIN_S if budget else None)
    try:
        _exec(job["source"], ns)
    except Exception:
        if not state["limited"]:
            raise
        # A satisfaction reference reads .value() of a search that found nothing in time: a timeout.
        return {"wall_s": time.perf_counter() - t0, "status": "timeout", "solver_limit_s": state["limit_s"]}
    model = ns.get(job["model_name"])
    if not hasattr(model, "status"):
        model = state.get("solver")
    out: dict[str, Any] = {"wall_s": time.perf_counter() - t0}
    if state["limited"]:
        out["solver_limit_s"] = state["limit_s"]
    if model is not None and hasattr(model, "status"):
        status = model.status()
        out["status"] = _status_name(status)
        out["solve_s"] = getattr(status, "runtime", None)
        has_objective = getattr(model, "objective_", None) is not None or (
            not hasattr(model, "objective_") and hasattr(model, "has_objective") and model.has_objective())
        if has_objective and out["status"] in ("OPTIMAL", "FEASIBLE"):
            out["objective"] = _plain(model.objective_value())
    return out


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _fixing(cp: Any, np: Any, expr: Any, value: Any) -> tuple[list[Any], str | None]:
    """Constraints tying `expr` (a CPMpy expression, array or constant) to `value`; or a reason it cannot."""
    exprs = np.asarray(expr, dtype=object)
    vals = np.asarray(value, dtype=object)
    if exprs.shape != vals.shape:
        return [], f"shape {list(vals.shape)} but the model's is {list(exprs.shape)}"
    cons: list[Any] = []
    for e, v in zip(exprs.reshape(-1), vals.reshape(-1), strict=True):
        if isinstance(v, float) and v.is_integer():
            v = int(v)  # a whole number printed as a float (the reference's own `float(x.value())`)
        if isinstance(v, float):
            return [], f"value {v!r} is not a whole number"
        if isinstance(e, cp.expressions.core.Expression):
            lb, ub = e.get_bounds()
            if not lb <= v <= ub:  # also keeps huge integers away from the solver's 64-bit range
                return [], f"value {v!r} outside the model's range {lb}..{ub}"
            cons.append(e == v)
        elif _plain(e) != v:
            return [], f"value {v!r} where the problem fixes {_plain(e)!r}"
    return cons, None


def _build(prefix: str, model_name: str, key_exprs: dict[str, str]) -> tuple[Any, dict[str, Any]]:
    import cpmpy as cp
    from ref_jobs_explain import record_lines

    record_lines(cp)  # names a violated constraint by its line
    ns: dict[str, Any] = {"__name__": "__main__"}
    with contextlib.redirect_stdout(sys.stderr):
        _exec(prefix, ns)
    return ns[model_name], {key: eval(src, ns) for key, src in key_exprs.items()}


def run_check(job: dict[str, Any]) -> dict[str, Any]:
    """Exec the reference up to its solve, then check each candidate (a dict key -> value) in turn."""
    import cpmpy as cp
    import numpy as np

    t0 = time.perf_counter()
    model, exprs = _build(job["prefix"], job["model_name"], job["key_exprs"])
    out: dict[str, Any] = {"build_s": time.perf_counter() - t0, "results": []}
    for cand in job["candidates"]:
        native = not isinstance(model, cp.Model)
        if native and out["results"]:
            # A reference that posts to a solver object directly (native constraints) cannot be
            # copied; rebuild it for every candidate after the first.
            model, exprs = _build(job["prefix"], job["model_name"], job["key_exprs"])
        try:
            res = _check_native(cp, np, model, exprs, cand["values"], job) if native else \
                _check_one(cp, np, model, exprs, cand["values"], cand["solver"], job)
        except Exception as e:  # noqa: BLE001 - a solver refusing a model is reported, not fatal
            res = {"status": "CHECK_ERROR", "reason": f"{cand['solver']}: {type(e).__name__}: {e}"}
        out["results"].append(res)
    return out


def _check_native(cp: Any, np: Any, solver: Any, exprs: dict[str, Any], values: dict[str, Any],
                  job: dict[str, Any]) -> dict[str, Any]:
    """Check against a reference that built a solver object itself: its own backend decides."""
    t0 = time.perf_counter()
    for key, expr in exprs.items():
        cons, why = _fixing(cp, np, expr, values[key])
        if why:
            return {"status": "UNSATISFIABLE", "reason": f"key {key!r}: {why}", "solve_s": 0.0}
        solver += cons
    limit = job.get("time_limit")
    solver.solve(time_limit=limit) if limit else solver.solve()
    out: dict[str, Any] = {"status": _status_name(solver.status()), "native_solver": type(solver).__name__}
    if out["status"] in ("FEASIBLE", "OPTIMAL") and solver.has_objective():
        out["objective"] = _plain(solver.objective_value())
    out["solve_s"] = time.perf_counter() - t0
    return out


def _check_one(cp: Any, np: Any, model: Any, exprs: dict[str, Any], values: dict[str, Any], solver: str,
               job: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    fix: list[Any] = []
    for key, expr in exprs.items():
        cons, why = _fixing(cp, np, expr, values[key])
        if why:
            return {"status": "UNSATISFIABLE", "reason": f"key {key!r}: {why}", "solve_s": 0.0}
        fix += cons
    base = list(model.constraints) + fix
    objective = getattr(model, "objective_", None)
    limit = job.get("time_limit")

    def solve(cons: list[Any], objective_too: bool = False) -> str:
        m = cp.Model(cons)
        if objective_too:
            m.objective(objective, minimize=model.objective_is_min)
        s = cp.SolverLookup.get(solver, m)
        s.solve(time_limit=limit) if limit else s.solve()
        return _status_name(s.status())

    optimum = job.get("optimum")
    # Without a known optimum, the best completion of the fixed keys is what must be proven optimal.
    out: dict[str, Any] = {"status": solve(base, objective_too=objective is not None and optimum is None)}
    if out["status"] == "UNSATISFIABLE":
        from ref_jobs_explain import explain_unsat

        out["reason"] = explain_unsat(cp, model, fix, solver, limit, job.get("prefix", ""))
    if out["status"] in ("FEASIBLE", "OPTIMAL") and objective is not None:
        out["objective"] = _plain(objective.value())
        if optimum is not None and out["objective"] != optimum:
            # The fixed keys may leave other variables free: ask whether some completion reaches the optimum.
            reach = solve(base + [objective == optimum])
            out["optimum_reachable"] = reach
            if reach in ("FEASIBLE", "OPTIMAL"):
                out["objective"] = optimum
        elif optimum is None:
            # Prove it optimal: no solution of the model at all does better.
            v = out["objective"]
            # The proof runs on OR-Tools whatever the checking backend: a search for a better solution is
            # a full solve of the problem, and CP-SAT is the backend that does that well on every model here.
            better = objective < v if model.objective_is_min else objective > v
            s = cp.SolverLookup.get("ortools", cp.Model(list(model.constraints) + [better]))
            s.solve(time_limit=limit) if limit else s.solve()
            out["better"] = _status_name(s.status())
            if out["better"] in ("FEASIBLE", "OPTIMAL"):
                out["better_objective"] = _plain(objective.value())
    out["solve_s"] = time.perf_counter() - t0
    return out


def _sample(cp: Any, np: Any, expr: Any, cast: str) -> Any:
    """A value of the right kind for `expr` (False for booleans, 0 for integers), nested like the print."""
    if isinstance(expr, (list, tuple)) or getattr(expr, "ndim", 0) > 0:
        return [_sample(cp, np, e, cast) for e in expr]
    if cast:
        return {"int": 0, "bool": False, "float": 0.0}[cast]
    if isinstance(expr, cp.expressions.core.Expression):
        return False if expr.is_bool() else 0
    return False if isinstance(expr, (bool, np.bool_)) else 0


def run_template(job: dict[str, Any]) -> dict[str, Any]:
    """The shape and kind of each output key, read off the model's expressions (no solving)."""
    import cpmpy as cp
    import numpy as np

    _, exprs = _build(job["prefix"], job["model_name"], job["key_exprs"])
    return {"template": {k: _sample(cp, np, e, job.get("casts", {}).get(k, "")) for k, e in exprs.items()}}


def run_variant(job: dict[str, Any]) -> dict[str, Any]:
    """Solve the model plus extra constraints (CPMpy source); print nothing, return the keys' values.

    `{objective}` in an extra constraint stands for the model's objective expression.
    """
    import cpmpy as cp

    ns: dict[str, Any] = {"__name__": "__main__"}
    with contextlib.redirect_stdout(sys.stderr):
        _exec(job["prefix"], ns)
    model = ns[job["model_name"]]
    ns["__objective__"] = getattr(model, "objective_", None)
    extra = [eval(src.replace("{objective}", "__objective__"), ns) for src in job.get("extra", [])]
    m = cp.Model(list(model.constraints) + extra)
    m.solve(job.get("solver", "ortools"), time_limit=job.get("time_limit") or 60)
    status = _status_name(m.status())
    if status not in ("FEASIBLE", "OPTIMAL"):
        return {"status": status}
    values = {}
    for key, src in job["key_exprs"].items():
        v = eval(src, ns).value()
        values[key] = v.tolist() if hasattr(v, "tolist") else _plain(v)
    obj = ns["__objective__"]
    return {"status": status, "values": values, "objective": None if obj is None else _plain(obj.value())}


def serve() -> int:
    """Warm server: import cpmpy once, then run each job (one JSON line on stdin) in a forked child.

    A job is {"mode", "job", "result", "stdout", "stderr", "timeout", "nice"} (paths, seconds, niceness).
    Replies one JSON line per job: {"timed_out": bool, "seconds": float}. The child gets its own
    process group, so a timeout kills it with everything it started.
    """
    import signal

    import cpmpy  # noqa: F401 - the point of the server is to have these imported before forking
    import numpy  # noqa: F401
    import ortools.sat.python.cp_model  # noqa: F401

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setpgid(0, 0)
                if req.get("nice"):
                    os.nice(int(req["nice"]))
                for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
                    os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
                code = main(["harness", req["mode"], req["job"], req["result"]])
            except BaseException:  # noqa: BLE001 - report anything, then leave without unwinding the server
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        deadline = t0 + float(req["timeout"])
        timed_out = False
        while True:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.perf_counter() > deadline:
                timed_out = True
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                break
            time.sleep(0.002)
        print(json.dumps({"timed_out": timed_out, "seconds": time.perf_counter() - t0}), flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv[1:2] == ["serve"]:
        return serve()
    mode, job_path, result_path = argv[1:4]
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    if mode == "probe":  # the dynamic check (ref_jobs_probe.py, beside this file)
        from ref_jobs_probe import run_probe

        result = run_probe(job)
    elif mode == "model":  # the model-level check of a submitted program (model_jobs.py, beside this file)
        from model_jobs import run_model

        result = run_model(job)
    else:
        result = {"ref": run_ref, "check": run_check, "variant": run_variant, "template": run_template}[mode](job)
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
