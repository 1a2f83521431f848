"""Answers for dead ends a weak model walks into in the kernel, so it does not spend its steps there.

A model that calls a name CPMpy does not have (`cp.Eq`) can read the AttributeError as a broken install and
spend its remaining steps on `pip install`, each cell waiting out pip's retries in a sandbox without network
(the runs are in docs/local.md, "Aids for weak models").

- An install command (`!pip install`, `%pip install`, `!conda install`, ...) is not run: its line becomes
  `pass`, the rest of the cell runs, and the model is told why (the packages it needs are there).
- `module 'cpmpy' has no attribute 'X'` gets how CPMpy writes what X usually means in other modelling
  libraries (comparisons and logic are Python operators), or else the CPMpy names closest to X.
- CPMpy's `__bool__ should not be called on a CPMPy expression` (a Python `if`, `and`, `or`, `not`, `max` or
  `any` applied to a decision-variable expression) gets the CPMpy forms of those.
"""

from __future__ import annotations

import difflib
import functools
import re
from importlib import metadata

_INSTALL = re.compile(
    r"^(?P<indent>[ \t]*)(?:[!%][ \t]*)?(?:sudo[ \t]+)?(?:python3?[ \t]+-m[ \t]+)?"
    r"(?:pip3?|conda|mamba|micromamba|uv[ \t]+pip|apt(?:-get)?)[ \t]+install\b.*$",
    re.MULTILINE,
)
_MISSING_NAME = re.compile(r"module 'cpmpy' has no attribute '(?P<name>\w+)'")
_TRUTH_VALUE = "__bool__ should not be called on a CPMPy expression"
_OPERATORS = {
    **dict.fromkeys(("eq", "equal", "equals"), "=="), **dict.fromkeys(("ne", "neq", "notequal"), "!="),
    **dict.fromkeys(("lt", "less"), "<"), **dict.fromkeys(("le", "leq", "lessequal"), "<="),
    **dict.fromkeys(("gt", "greater"), ">"), **dict.fromkeys(("ge", "geq", "greaterequal"), ">="),
}
# What a name from another library usually means, and how CPMpy writes it.
_SPELLED_OTHERWISE = {
    **dict.fromkeys(_OPERATORS,
                    "comparisons are Python operators on CPMpy expressions: `model += x + y == total`, "
                    "`x != y`, `x <= 3`"),
    **dict.fromkeys(("and_", "or_", "not_", "land", "lor", "lnot", "implies", "implication", "ifthen"),
                    "logic is written with operators and methods: `(a) & (b)`, `(a) | (b)`, `~(a)`, "
                    "`(a).implies(b)`, `cp.all([...])`, `cp.any([...])`"),
    **dict.fromkeys(("minimize", "minimise", "maximize", "maximise", "objective"),
                    "the objective is a method of the model: `model.minimize(expr)` or `model.maximize(expr)`"),
    **dict.fromkeys(("solve", "solver", "cpsolver", "solvermodel"),
                    "solve with `model.solve()` (or `cp.SolverLookup.get(\"ortools\", model).solve()`), then read "
                    "`var.value()`"),
    **dict.fromkeys(("add", "append", "addconstraint", "constraint", "post"),
                    "a constraint is a comparison of expressions, added with `model += ...`; a sum is `+` or "
                    "`cp.sum(xs)`"),
    **dict.fromkeys(("prod", "product", "mul", "multiply", "times"),
                    "multiplication is `*` (`x * y`); for a list, multiply its items in a loop"),
    **dict.fromkeys(("var", "variable", "newintvar", "int_var", "newboolvar"),
                    "decision variables are `cp.intvar(lb, ub, shape=..., name=...)` and "
                    "`cp.boolvar(shape=..., name=...)`"),
}


@functools.lru_cache(maxsize=1)
def _cpmpy_names() -> tuple[str, ...]:
    import cpmpy

    return tuple(n for n in dir(cpmpy) if not n.startswith("_"))


@functools.lru_cache(maxsize=1)
def _versions() -> str:
    found = []
    for dist in ("cpmpy", "ortools", "numpy"):
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def strip_installs(code: str) -> tuple[str, list[str]]:
    """The cell with each install command replaced by `pass`, and the commands removed."""
    removed = [m.group(0).strip() for m in _INSTALL.finditer(code)]
    if not removed:
        return code, []
    return _INSTALL.sub(lambda m: f"{m.group('indent')}pass", code), removed


def install_note(removed: list[str]) -> str:
    shown = ", ".join(f"`{c[:80]}`" for c in removed[:3])
    return (f"[Not run: {shown}. The harness runs no install commands, and none is needed: "
            f"{_versions()} are installed. An error such as `module 'cpmpy' has no attribute ...` means "
            "that name does not exist in CPMpy; reinstalling does not change that. The rest of the cell ran.]")


def error_hint(error_name: str, error_value: str) -> str:
    """A hint to append to a cell's error, or "" when there is none for it."""
    if error_name == "AttributeError" and error_value == "'function' object has no attribute 'value'":
        return ("\n[That `.value` was asked of a method (`model.objective`, say), not of a variable. After "
                "`model.solve()`, the objective's value is `model.objective_value()`, a variable's `x.value()`.]")
    if error_name == "AttributeError":
        return missing_name_hint(error_value)
    if error_name == "ValueError" and _TRUTH_VALUE in error_value:
        return ("\n[A CPMpy expression has no True/False value while you build the model, so a Python `if`, `and`, "
                "`or`, `not`, `max()`, `min()`, `any()` or `all()` applied to one fails. Write the condition as a "
                "constraint instead: `model += (cond).implies(effect)`, `cp.IfThenElse(cond, a, b)`, `(a) & (b)`, "
                "`(a) | (b)`, `~(a)`, `cp.max(xs)`, `cp.min(xs)`, `cp.any(xs)`, `cp.all(xs)`.]")
    return ""


def missing_name_hint(error_value: str) -> str:
    """For `module 'cpmpy' has no attribute 'X'`: the names it may have meant; "" for any other error."""
    m = _MISSING_NAME.search(error_value)
    if not m:
        return ""
    name = m.group("name")
    names = _cpmpy_names()
    lowered = {n.lower(): n for n in names}
    close = [lowered[n] for n in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)]
    parts = [f"CPMpy has no `cp.{name}`"]
    if (op := _OPERATORS.get(name.lower())) is not None:
        parts.append(f"write `cp.{name}(a, b)` as `a {op} b`")
    if (how := _SPELLED_OTHERWISE.get(name.lower())) is not None:
        parts.append(how)
    if (same := lowered.get(name.lower())) is not None:
        parts.append(f"write `cp.{same}`: names are case-sensitive")
    elif close and how is None:  # near spellings of another meaning mislead (`Equal` is not `AllEqual`)
        parts.append("names it does have that are close: " + ", ".join(f"`cp.{n}`" for n in close))
    if len(parts) == 1:
        shown = [n for n in names if n[0].isupper() or n in ("intvar", "boolvar", "sum", "min", "max", "abs")]
        parts.append("the names it has: " + ", ".join(f"`cp.{n}`" for n in shown))
    return "\n[" + "; ".join(parts) + ".]"
