"""Naming the constraint a submission breaks: the reference line that added each constraint, and the first one the
fixed values contradict (used by harness.py and harness_probe.py in the harness's subprocess; no triforge import)."""

from __future__ import annotations

import sys
from typing import Any

REF_FILE = "<reference>"
_SAT = ("FEASIBLE", "OPTIMAL")


def _status_name(status: Any) -> str:
    return getattr(getattr(status, "exitstatus", None), "name", "UNKNOWN")


def _ref_line() -> int | None:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename == REF_FILE:
            return f.f_lineno
        f = f.f_back
    return None


def record_lines(cp: Any) -> None:
    """Remember the reference line that added each top-level constraint (for naming a violated one)."""
    original = cp.Model.add
    if getattr(original, "_triforge", False):
        return

    def add(self: Any, con: Any) -> Any:
        n = len(self.constraints)
        ret = original(self, con)
        if len(self.constraints) > n:
            lines = self.__dict__.setdefault("_triforge_lines", {})
            lines[len(self.constraints) - 1] = _ref_line()
        return ret

    add._triforge = True  # type: ignore[attr-defined]
    cp.Model.add = add


def explain_unsat(cp: Any, model: Any, fix: list[Any], solver: str, limit: float | None, source: str = "") -> str:
    """The first top-level constraint of `model` that the fixed values contradict: the shortest prefix of the
    model's constraints that is unsatisfiable together with `fix` (binary search), named by its source line."""
    cons = list(model.constraints)
    per = min(limit or 5.0, 5.0)

    def unsat(k: int) -> bool | None:
        s = cp.SolverLookup.get(solver, cp.Model(cons[:k] + fix))
        s.solve(time_limit=per)
        name = _status_name(s.status())
        return True if name == "UNSATISFIABLE" else False if name in _SAT else None

    try:
        if unsat(0) is not False:
            return "the values violate the problem's constraints (each value is out of its variable's range)"
        lo, hi = 0, len(cons)  # cons[:lo] satisfiable, cons[:hi] not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            r = unsat(mid)
            if r is None:
                return "the values violate the problem's constraints"
            lo, hi = (lo, mid) if r else (mid, hi)
    except Exception:  # noqa: BLE001 - the explanation is a courtesy; the verdict stands without it
        return "the values violate the problem's constraints"
    line = model.__dict__.get("_triforge_lines", {}).get(hi - 1)
    text = str(cons[hi - 1])
    text = text if len(text) <= 160 else text[:157] + "..."
    where = f"constraint {hi} of {len(cons)}"
    lines = source.splitlines()
    if line and 0 < line <= len(lines):
        where += f" (added at line {line} of the reference: `{lines[line - 1].strip()[:120]}`)"
    return f"the values violate the problem's constraints: first violated is {where}: {text}"
