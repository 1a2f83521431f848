"""The candidate pool and selection from its per-example Pareto front.

Each candidate is scored on the same validation examples. A candidate is on the front when it
has the best score on at least one example and no other candidate is at least as good on every
example and better on one. Parents are drawn from the front with probability proportional to the
number of examples on which they are best (as GEPA does), from a seeded generator.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from typing import Any

from triforge.maestro.program import Program


@dataclass
class Candidate:
    id: int
    program: Program
    parents: list[int]
    origin: str  # seed | config | graph | merge
    val_scores: dict[str, float] = field(default_factory=dict)
    usd_per_rollout: float = 0.0
    found_at_rollouts: int = 0

    @property
    def score(self) -> float:
        return statistics.fmean(self.val_scores.values()) if self.val_scores else 0.0

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "hash": self.program.hash, "parents": self.parents, "origin": self.origin,
                "val_score": round(self.score, 6), "usd_per_rollout": round(self.usd_per_rollout, 8),
                "found_at_rollouts": self.found_at_rollouts}


def dominates(a: Candidate, b: Candidate, ids: list[str]) -> bool:
    sa, sb = [a.val_scores.get(i, 0.0) for i in ids], [b.val_scores.get(i, 0.0) for i in ids]
    return all(x >= y for x, y in zip(sa, sb, strict=True)) and any(x > y for x, y in zip(sa, sb, strict=True))


class Pool:
    def __init__(self, val_ids: list[str]) -> None:
        self.val_ids = list(val_ids)
        self.candidates: list[Candidate] = []

    def add(self, cand: Candidate) -> None:
        self.candidates.append(cand)

    def get(self, cid: int) -> Candidate:
        return self.candidates[cid]

    def by_hash(self, h: str) -> Candidate | None:
        return next((c for c in self.candidates if c.program.hash == h), None)

    def best(self) -> Candidate:
        """Highest mean validation score; ties go to the cheaper, then the earlier candidate."""
        return max(self.candidates, key=lambda c: (round(c.score, 12), -c.usd_per_rollout, -c.id))

    def front(self) -> dict[int, int]:
        """Candidate id -> number of validation examples on which it is best, for non-dominated ones."""
        wins: dict[int, int] = {}
        for ex in self.val_ids:
            top = max(c.val_scores.get(ex, 0.0) for c in self.candidates)
            for c in self.candidates:
                if c.val_scores.get(ex, 0.0) == top:
                    wins[c.id] = wins.get(c.id, 0) + 1
        alive = [self.get(i) for i in wins]
        return {c.id: wins[c.id] for c in alive
                if not any(dominates(o, c, self.val_ids) for o in alive if o.id != c.id)}

    def select(self, rng: random.Random) -> Candidate:
        front = self.front()
        if not front:
            return self.best()
        ids = sorted(front)
        return self.get(rng.choices(ids, weights=[front[i] for i in ids], k=1)[0])

    def ancestors(self, cid: int) -> set[int]:
        seen: set[int] = set()
        todo = [cid]
        while todo:
            c = todo.pop()
            if c in seen:
                continue
            seen.add(c)
            todo.extend(self.get(c).parents)
        return seen
