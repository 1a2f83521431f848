"""Measured budgets for reference runs, and the instances with no solution or none within reach.

The list lives in `ref_budgets.toml` beside this module. A problem's `# Timeout:` header is the budget
unless an entry gives a measured one (`budget_s`, for every instance, or `instance_budget_s`, per
instance). `no_solution` instances have none at all: the reference must prove them UNSATISFIABLE.
`beyond_reach` instances found no solution in any budget tried here: `refs` skips them unless asked.
`marginal` instances solved within their budget in some runs here and not in others (CP-SAT's parallel
portfolio is not deterministic): they are run and reported, and a timeout there does not fail `refs`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Protocol

DATA_FILE = Path(__file__).with_name("ref_budgets.toml")


class _HasLimit(Protocol):
    id: str
    time_limit_s: float


@dataclass(frozen=True)
class RefPolicy:
    problem_id: str
    budget_s: float | None = None
    instance_budget_s: dict[int, float] = field(default_factory=dict)
    no_solution: tuple[int, ...] = ()
    beyond_reach: tuple[int, ...] = ()
    marginal: tuple[int, ...] = ()
    why: str = ""


class PolicyError(ValueError):
    pass


@cache
def _load(path: Path) -> dict[str, RefPolicy]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise PolicyError(f"{path}: {e}") from None
    out = {}
    for pid, e in data.items():
        unknown = set(e) - {"budget_s", "instance_budget_s", "no_solution", "beyond_reach", "marginal", "why"}
        if unknown or not e.get("why"):
            raise PolicyError(f"{path}: [{pid}] needs a `why`, and knows no {sorted(unknown)}")
        out[pid] = RefPolicy(pid, e.get("budget_s"), {int(k): float(v) for k, v in e.get("instance_budget_s", {}).items()},
                             tuple(e.get("no_solution", ())), tuple(e.get("beyond_reach", ())),
                             tuple(e.get("marginal", ())), e["why"])
        pol = out[pid]
        if both := sorted(set(pol.marginal) & {*pol.no_solution, *pol.beyond_reach}):
            raise PolicyError(f"{path}: [{pid}] lists instance(s) {both} as marginal and in another list")
    return out


def policy(problem_id: str, path: Path | None = None) -> RefPolicy:
    return _load(path or DATA_FILE).get(problem_id, RefPolicy(problem_id))


def ref_budget(problem: _HasLimit, instance: int, path: Path | None = None) -> float:
    """Seconds a reference run gets: a measured per-instance or per-problem budget, else the header's."""
    pol = policy(problem.id, path)
    return pol.instance_budget_s.get(instance, pol.budget_s or problem.time_limit_s)


def expectation(problem_id: str, instance: int, path: Path | None = None) -> str:
    """'no_solution', 'beyond_reach', 'marginal' or '' (a valid solution is expected within the budget)."""
    pol = policy(problem_id, path)
    if instance in pol.no_solution:
        return "no_solution"
    if instance in pol.marginal:
        return "marginal"
    return "beyond_reach" if instance in pol.beyond_reach else ""
