"""Code the harness runs inside the agent's IPython kernel: explain an infeasible model, prove an optimum.

The snippets find the agent's CPMpy model in the kernel namespace (the variable named `model`, else
the last `cpmpy.Model` defined) and print one short report; no CP logic lives in the agent itself.
"""

from __future__ import annotations

FIND_MODEL = r'''
def _triforge_find_model():
    import cpmpy as _cp
    ns = globals()
    if isinstance(ns.get("model"), _cp.Model):
        return "model", ns["model"]
    found = [(k, v) for k, v in ns.items() if isinstance(v, _cp.Model) and not k.startswith("_")]
    return found[-1] if found else (None, None)
'''

EXPLAIN = FIND_MODEL + r'''
def _triforge_explain(time_limit):
    import cpmpy as _cp
    from cpmpy.tools.explain import mus as _mus
    name, m = _triforge_find_model()
    if m is None:
        return "No CPMpy Model found in the kernel; build one (e.g. `model = cp.Model(...)`) first."
    cons = list(_cp.transformations.normalize.toplevel_list(m.constraints, merge_and=False))
    if _cp.Model(cons).solve(time_limit=time_limit):
        return f"The model `{name}` is satisfiable ({len(cons)} constraints); nothing to explain."
    core = _mus(cons)
    lines = [f"The model `{name}` is unsatisfiable. A minimal conflicting subset of its {len(cons)} constraints "
             f"({len(core)} constraints; removing any one of them makes the rest satisfiable):"]
    lines += [f"  {i + 1}. {str(c)[:300]}" for i, c in enumerate(core[:40])]
    if len(core) > 40:
        lines.append(f"  ... and {len(core) - 40} more")
    return "\n".join(lines)
print(_triforge_explain(%(time_limit)s))
'''

PROVE = FIND_MODEL + r'''
def _triforge_prove(time_limit):
    import cpmpy as _cp
    name, m = _triforge_find_model()
    if m is None:
        return "No CPMpy Model found in the kernel; build one first."
    obj = getattr(m, "objective_", None)
    if obj is None:
        return f"The model `{name}` has no objective; call model.minimize(...) or model.maximize(...)."
    if not m.solve(time_limit=time_limit):
        return f"The model `{name}` has no solution within {time_limit} s, so there is no optimum to prove."
    best = obj.value()
    better = (obj < best) if m.objective_is_min else (obj > best)
    check = _cp.Model(list(m.constraints) + [better])
    sense = "smaller" if m.objective_is_min else "larger"
    if check.solve(time_limit=time_limit):
        return (f"NOT proven: a solution with a {sense} objective exists ({obj.value()} vs {best}); "
                "the solve was probably cut short: raise its time limit.")
    status = check.status().exitstatus.name
    if status != "UNSATISFIABLE":
        return f"Inconclusive: the check for a {sense} objective than {best} ended with {status} within {time_limit} s."
    return f"Proven optimal: objective {best}; no solution has a {sense} objective (checked: UNSATISFIABLE)."
print(_triforge_prove(%(time_limit)s))
'''


def explain_code(time_limit: float = 30.0) -> str:
    return EXPLAIN % {"time_limit": float(time_limit)}


def prove_code(time_limit: float = 60.0) -> str:
    return PROVE % {"time_limit": float(time_limit)}
