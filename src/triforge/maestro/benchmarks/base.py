"""Benchmark-agnostic data shapes shared by every maestro benchmark (IFBench, HotpotQA, CP-Bench)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Example:
    """One benchmark item: what the program is given (`inputs`) and what grading needs (`gold`)."""

    id: str
    inputs: dict[str, Any]
    gold: dict[str, Any] = field(default_factory=dict)

    def __hash__(self) -> int:  # the dict fields are not hashable; the id is enough
        return hash((type(self).__name__, self.id))


@dataclass(frozen=True)
class MetricResult:
    """A graded output: `score` in [0, 1], `feedback` for reflection, `details` for reports."""

    score: float
    feedback: str
    details: dict[str, Any] = field(default_factory=dict)
