"""Naming the constraint a submission breaks: the reference line that added each constraint, and the first one the
fixed values contradict (used by ref_jobs.py and ref_jobs_probe.py in the harness's subprocess; no triforge import)."""

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

    def unsat(extra: list[Any]) -> bool | None:
        s = cp.SolverLookup.get(solver, cp.Model(extra + fix))
        s.solve(time_limit=per)
        name = _status_name(s.status())
        return True if name == "UNSATISFIABLE" else False if name in _SAT else None

    def first(base: list[Any], items: list[Any]) -> int | None:
        """Index of the item whose prefix first makes base + items[:i + 1] unsatisfiable (binary search)."""
        lo, hi = 0, len(items)  # base + items[:lo] satisfiable, base + items[:hi] not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            r = unsat(base + items[:mid])
            if r is None:
                return None
            lo, hi = (lo, mid) if r else (mid, hi)
        return hi - 1

    vague = "the values violate the problem's constraints"
    try:
        alone = unsat([])
        if alone:
            return f"{vague}: the printed values contradict each other (two of them show one model variable)"
        g = first([], cons) if alone is False else None
        if g is None:
            return vague
        group = cons[g]
        j = first(cons[:g], list(group)) if isinstance(group, (list, tuple)) and len(group) > 1 else None
    except Exception:  # noqa: BLE001 - the explanation is a courtesy; the verdict stands without it
        return vague
    line = model.__dict__.get("_triforge_lines", {}).get(g)
    text = str(group[j] if j is not None else group)
    text = text if len(text) <= 160 else text[:157] + "..."
    where = f"constraint {g + 1} of {len(cons)}" + (f", item {j + 1} of its {len(group)}" if j is not None else "")
    lines = source.splitlines()
    if line and 0 < line <= len(lines):
        where += f" (added at line {line} of the reference: `{lines[line - 1].strip()[:120]}`)"
    return f"{vague}: first violated is {where}: {text}"
