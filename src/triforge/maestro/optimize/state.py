"""What one search carries: settings, splits, pool, ledger, rollouts, reflection model, seeded RNG.

`SearchState.judge` is the one acceptance rule every step uses: the child runs on the parent's
minibatch (same examples, same sample index 0), it is kept only when its score sum is higher (or
equal at a lower cost per rollout, for a cheaper model), and only then is it scored on validation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triforge.core.budget import Budget
from triforge.maestro.benchmarks.base import Example
from triforge.maestro.evaluate import ExampleResult
from triforge.maestro.optimize.budget import BudgetedLLM
from triforge.maestro.optimize.pareto import Candidate, Pool
from triforge.maestro.optimize.proposals import Proposal, RunLog
from triforge.maestro.optimize.rollouts import Rollouts, scores
from triforge.maestro.program import Program


@dataclass
class ProgramOptimizeSettings:
    budget: int | None = None  # rollouts, train (minibatches included) + validation
    max_calls: int | None = None  # LLM calls of every kind
    seed: int = 0
    minibatch: int = 4
    graph_step: bool = True
    config_per_graph: int = 1  # config steps between two graph steps
    patience: int | None = None  # proposals without a better best
    max_wall_s: float | None = None
    stop_file: Path | None = None
    models: list[str] = field(default_factory=list)  # aliases a module may use (its cost is the alias's price)
    tools: dict[str, str] = field(default_factory=dict)  # fn -> what it does
    validators: dict[str, str] = field(default_factory=dict)
    max_edits: int = 3  # edits in one graph proposal
    max_step_distance: int = 10  # trust region: graph distance from the parent
    max_total_distance: int = 30  # and from the seed
    max_demos: int = 2
    max_proposals: int = 1000  # a backstop: every proposal may be answered from what was already run

    def fingerprint(self) -> dict[str, Any]:
        """What changes the course of a search (a resume with a different budget replays the same prefix)."""
        return {"seed": self.seed, "minibatch": self.minibatch, "graph_step": self.graph_step,
                "config_per_graph": self.config_per_graph, "models": self.models, "tools": sorted(self.tools),
                "validators": sorted(self.validators), "max_edits": self.max_edits,
                "max_step_distance": self.max_step_distance, "max_total_distance": self.max_total_distance,
                "max_demos": self.max_demos}


class SearchState:
    def __init__(self, settings: ProgramOptimizeSettings, seed_program: Program, train: list[Example],
                 val: list[Example], rollouts: Rollouts, ledger: Budget, reflection: BudgetedLLM,
                 log: RunLog) -> None:
        self.settings, self.seed_program, self.train, self.val = settings, seed_program, train, val
        self.rollouts, self.ledger, self.reflection, self.log = rollouts, ledger, reflection, log
        self.pool = Pool([ex.id for ex in val])
        self.rng = random.Random(settings.seed)
        self.proposals = 0
        self.reflections = 0
        self._order: list[Example] = []
        self.current: Proposal | None = None  # the proposal in flight, logged even when a cap stops it

    def minibatch(self) -> list[Example]:
        """The next train minibatch, epoch by epoch through a seeded shuffle."""
        n = min(self.settings.minibatch, len(self.train))
        if len(self._order) < n:
            order = list(self.train)
            self.rng.shuffle(order)
            self._order = order
        mb, self._order = self._order[:n], self._order[n:]
        return mb

    def reflect(self, prompt: str) -> str:
        """One reflection call; its sample index is the call's number, so a replay is exact."""
        self.reflections += 1
        return self.reflection.text(prompt, sample=self.reflections)

    def add_candidate(self, program: Program, parents: list[int], origin: str) -> Candidate:
        results = self.rollouts.run(program, self.val, "val")
        cand = Candidate(len(self.pool.candidates), program, parents, origin, scores(results),
                         self.rollouts.usd_per_rollout(program, results),
                         self.ledger.spent().rollouts)
        self.pool.add(cand)
        return cand

    def judge(self, prop: Proposal, parent: Candidate, child: Program, mb: list[Example],
              parent_results: list[ExampleResult]) -> Candidate | None:
        prop.child_hash = child.hash
        if self.pool.by_hash(child.hash) is not None:
            prop.verdict = "rejected: the same program is already in the pool"
            return None
        child_results = self.rollouts.run(child, mb, "train")
        ps, cs = sum(r.score for r in parent_results), sum(r.score for r in child_results)
        prop.parent_scores = [r.score for r in parent_results]
        prop.child_scores = [r.score for r in child_results]
        cheaper = (self.rollouts.usd_per_rollout(child, child_results)
                   < self.rollouts.usd_per_rollout(parent.program, parent_results))
        if cs > ps or (cs == ps and cheaper and prop.step == "config" and prop.move == "model"):
            best_before = self.pool.best().score
            cand = self.add_candidate(child, [parent.id], prop.step if prop.move != "merge" else "merge")
            prop.verdict = "accepted"
            prop.child_id, prop.val_score = cand.id, round(cand.score, 6)
            prop.improved = cand.score > best_before
            return cand
        prop.verdict = f"rejected: minibatch {cs:g} <= parent {ps:g}"
        return None
