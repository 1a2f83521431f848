"""The proposal log: one JSON line per proposal, written as it is decided.

Each line holds the step and move, the parent, the diff from parent to child, the example ids that
motivated it, the paired minibatch scores, the verdict with its reason, the validation score when it
was accepted, the reflection's rationale, and the ledger's counts so far. Nothing in it depends on
the clock, so the same seed and cache give a byte-identical log.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from triforge.maestro.program import Program


@dataclass
class Proposal:
    index: int
    step: str  # config | graph
    move: str  # instruction | demos | model | merge | edit
    parent_id: int
    module: str | None = None
    motivating_ids: list[str] = field(default_factory=list)
    minibatch_ids: list[str] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)
    rationale: str = ""
    diff: str = ""
    child_hash: str | None = None
    parent_scores: list[float] = field(default_factory=list)
    child_scores: list[float] = field(default_factory=list)
    verdict: str = ""
    child_id: int | None = None
    val_score: float | None = None
    improved: bool = False
    spent: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)


def program_diff(parent: Program, child: Program) -> str:
    a, b = parent.to_json().splitlines(), child.to_json().splitlines()
    return "\n".join(difflib.unified_diff(a, b, "parent", "child", n=1, lineterm=""))


class RunLog:
    """proposals.jsonl and curve.json in a run directory (or only in memory when `path` is None)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.proposals: list[Proposal] = []
        self.curve: list[tuple[int, float]] = []  # (search rollouts, best validation score)
        self.on_add: Callable[[Proposal], None] | None = None  # progress on the terminal
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
            (path / "proposals.jsonl").write_text("", encoding="utf-8")  # a resume replays the log from the start

    def add(self, prop: Proposal) -> None:
        self.proposals.append(prop)
        if self.path is not None:
            with (self.path / "proposals.jsonl").open("a", encoding="utf-8") as f:
                f.write(prop.to_json() + "\n")
        if self.on_add is not None:
            self.on_add(prop)

    def point(self, rollouts: int, best: float) -> None:
        self.curve.append((rollouts, round(best, 6)))

    def best(self) -> float:
        return self.curve[-1][1] if self.curve else 0.0
