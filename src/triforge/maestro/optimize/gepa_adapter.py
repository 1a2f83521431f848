"""The real `gepa` package (PyPI, an optional extra) run on our programs through an adapter.

GEPA optimizes the instructions of the program's llm modules (`{module: instruction}`); the adapter
runs candidates with our executor through `Rollouts` (so every rollout is reserved in our ledger),
builds GEPA's reflective dataset from our traces and the benchmark's feedback, and hands GEPA our
reflection model as a plain callable (so its calls go through our client, cache and ledger). When our
ledger refuses a rollout or a call, GEPA is stopped and the best candidate our adapter saw scored on
all of validation is the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from triforge.core.budget import Budget
from triforge.core.errors import BudgetExceeded, UserError
from triforge.maestro.benchmarks.base import Example
from triforge.maestro.nodes import LLMNode
from triforge.maestro.optimize.budget import BudgetedLLM
from triforge.maestro.optimize.pareto import Candidate, Pool
from triforge.maestro.optimize.proposals import Proposal, RunLog, program_diff
from triforge.maestro.optimize.rollouts import Rollouts, scores
from triforge.maestro.optimize.search import SearchOutcome
from triforge.maestro.optimize.state import ProgramOptimizeSettings
from triforge.maestro.program import Program


def with_instructions(seed: Program, candidate: Mapping[str, str]) -> Program:
    p = seed.copy()
    for n in p.nodes:
        if isinstance(n, LLMNode) and n.name in candidate:
            n.instruction = candidate[n.name]
    return p


class ProgramAdapter:
    """GEPA's adapter protocol (`evaluate`, `make_reflective_dataset`) over a maestro program."""

    propose_new_texts = None

    def __init__(self, seed: Program, val: list[Example], rollouts: Rollouts, pool: Pool, log: RunLog) -> None:
        self.seed, self.val_ids = seed, [e.id for e in val]
        self.rollouts, self.pool, self.log = rollouts, pool, log

    def evaluate(self, batch: list[Example], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        from gepa import EvaluationBatch

        program = with_instructions(self.seed, candidate)
        is_val = [e.id for e in batch] == self.val_ids
        results = self.rollouts.run(program, batch, "val" if is_val else "train")
        if is_val and self.pool.by_hash(program.hash) is None:
            best_before = self.pool.best().score if self.pool.candidates else -1.0
            cand = Candidate(len(self.pool.candidates), program, [], "gepa", scores(results), 0.0,
                             self.rollouts.ledger.spent().rollouts)
            self.pool.add(cand)
            if cand.id > 0:
                prop = Proposal(len(self.log.proposals), "gepa", "instruction", 0, child_hash=program.hash,
                                diff=program_diff(self.seed, program), verdict="accepted by GEPA",
                                child_id=cand.id, val_score=round(cand.score, 6), improved=cand.score > best_before)
                sp = self.rollouts.ledger.spent()
                prop.spent = {"search_rollouts": sp.rollouts, "train_rollouts": sp.kind("rollouts.train"),
                              "calls": sp.calls}
                self.log.add(prop)
            self.log.point(self.rollouts.ledger.spent().rollouts, self.pool.best().score)
        return EvaluationBatch(outputs=[r.outputs for r in results], scores=[r.score for r in results],
                               trajectories=results if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, Sequence[Mapping[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for name in components_to_update:
            records = []
            for r in eval_batch.trajectories or []:
                step = next((t for t in r.trace if t["node"] == name), None)
                records.append({"Inputs": step["inputs"] if step else {},
                                "Generated Outputs": step["outputs"] if step else "(the module did not run)",
                                "Feedback": f"score {r.score:g}. {r.feedback}"})
            out[name] = records
        return out


class _QuietLogger:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, message: str) -> None:
        self.lines.append(message)


def search_gepa(task: Any, rollouts: Rollouts, ledger: Budget, reflection: BudgetedLLM, settings: ProgramOptimizeSettings,
                log: RunLog) -> SearchOutcome:
    try:
        import gepa
    except ImportError:
        raise UserError("the gepa optimizer needs the gepa package: pip install 'triforge[maestro-opt]'") from None
    seed = task.program
    components = {n.name: n.instruction for n in seed.nodes if isinstance(n, LLMNode)}
    if not components:
        raise UserError(f"program {seed.name!r} has no llm module for GEPA to optimize")
    pool = Pool([e.id for e in task.val])
    adapter = ProgramAdapter(seed, task.val, rollouts, pool, log)
    calls = {"n": 0}

    def reflect(prompt: str | list[dict[str, Any]]) -> str:
        calls["n"] += 1
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        return reflection.complete(messages, sample=calls["n"]).content or ""

    stop = "gepa finished"
    logger = _QuietLogger()
    try:
        gepa.optimize(seed_candidate=components, trainset=task.train, valset=task.val, adapter=adapter,
                      reflection_lm=reflect, max_metric_calls=settings.budget or 10**9,
                      reflection_minibatch_size=settings.minibatch, seed=settings.seed, logger=logger,
                      display_progress_bar=False, raise_on_exception=True)
    except BudgetExceeded as e:
        stop = str(e)
    if not pool.candidates:
        raise UserError("GEPA stopped before the seed program was scored on validation; raise --max-rollouts")
    best = pool.best()
    return SearchOutcome(best.program, best.score, pool, log, stop, {"gepa_log_lines": len(logger.lines)})
