"""Runs programs on examples for the search: every rollout reserved in the budget, each result kept.

A (program hash, example id) pair is run once per search; asking again returns the kept result and
spends nothing. A rollout that failed at the endpoint stops the search (`EndpointDown`): scoring it 0
would mislead the search, and a re-run resumes from the response cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from triforge.core.budget import Budget
from triforge.core.errors import EndpointError
from triforge.maestro.benchmarks.base import Example
from triforge.maestro.evaluate import ExampleResult, Metric, evaluate
from triforge.maestro.interpreter import Models, NodeError, Retriever, model_for
from triforge.maestro.optimize.budget import BudgetedLLM, keep_for_test, reserve_rollouts
from triforge.maestro.program import Program


class EndpointDown(EndpointError):
    """The task endpoint failed during a rollout; the search stops and a re-run resumes."""


class TaskModels:
    """The task models of the search, each wrapped so its calls are counted in the budget before they are sent.

    A distributed executor sends it to the workers with every evaluation: its models and its ledger
    (a budget, then a hosted handle), the wrappers rebuilt there."""

    def __init__(self, models: Models, ledger: Budget) -> None:
        self._models, self._ledger = models, ledger
        self._wrapped: dict[str | None, BudgetedLLM] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"_models": self._models, "_ledger": self._ledger, "_wrapped": {}}

    def __call__(self, alias: str | None) -> BudgetedLLM:
        w = self._wrapped.get(alias)
        if w is None:
            w = self._wrapped[alias] = BudgetedLLM(model_for(self._models, alias), self._ledger, "task")
        return w


class Rollouts:
    def __init__(self, metric: Metric, models: Models, ledger: Budget, *,
                 retrievers: dict[str, Retriever] | None = None, jobs: int = 8,
                 on_result: Callable[[ExampleResult], None] | None = None) -> None:
        self.metric, self.ledger, self.retrievers, self.jobs = metric, ledger, retrievers or {}, jobs
        self.models = TaskModels(models, ledger)
        self.on_result = on_result
        self.test_rollouts = 0  # what the final test evaluation will run: its calls are kept back from the search
        self._memo: dict[tuple[str, str], ExampleResult] = {}

    def known(self, program: Program, example_id: str) -> ExampleResult | None:
        return self._memo.get((program.hash, example_id))

    def missing(self, program: Program, examples: Sequence[Example]) -> int:
        h = program.hash
        return sum((h, ex.id) not in self._memo for ex in examples)

    def run(self, program: Program, examples: Sequence[Example], kind: str) -> list[ExampleResult]:
        """Results for every example, in order; new rollouts are reserved all together or not at all."""
        h = program.hash
        todo, seen = [], set()
        for ex in examples:  # by id: some Example subclasses are not hashable
            if (h, ex.id) not in self._memo and ex.id not in seen:
                seen.add(ex.id)
                todo.append(ex)
        if todo:
            reserve_rollouts(self.ledger, len(todo), kind)
            report = evaluate(program, todo, self.metric, self.models, retrievers=self.retrievers,
                              jobs=self.jobs, on_result=self.on_result)
            if kind != "test":
                keep_for_test(self.ledger, self.test_rollouts)
            down = [r for r in report.results if r.error_kind == "endpoint"]
            if down:
                raise EndpointDown(f"the endpoint failed during the search ({down[0].error}); "
                                   f"re-run the same command to resume from the response cache")
            for r in report.results:
                self._memo[(h, r.example_id)] = r
        return [self._memo[(h, ex.id)] for ex in examples]

    def usd_per_rollout(self, program: Program, results: Sequence[ExampleResult]) -> float:
        """Mean model cost per rollout, priced from the recorded tokens (a cached reply is priced the same)."""
        if not results:
            return 0.0
        total = 0.0
        for r in results:
            for t in r.trace:
                calls = t.get("llm_calls") or []
                if not calls:
                    continue
                try:
                    cfg = self.models(getattr(program.node(t["node"]), "model", None)).config
                except (KeyError, NodeError):  # a node or alias that is gone: nothing to price it with
                    continue
                total += sum(cfg.cost_usd(int(c.get("input_tokens") or 0), int(c.get("output_tokens") or 0),
                                          int(c.get("cached_input_tokens") or 0)) for c in calls)
        return total / len(results)


def scores(results: Sequence[ExampleResult]) -> dict[str, float]:
    return {r.example_id: r.score for r in results}


def trace_summary(result: ExampleResult, limit: int = 600) -> list[dict[str, Any]]:
    """A short view of a rollout's trace for reflection: node, inputs, outputs, error, per step."""
    out = []
    for t in result.trace:
        out.append({"node": t["node"], "inputs": _clip(t.get("inputs"), limit), "outputs": _clip(t.get("outputs"), limit),
                    **({"error": t["error"]} if t.get("error") else {})})
    return out


def _clip(value: Any, limit: int) -> Any:
    if isinstance(value, dict):
        return {k: _clip(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        text = [_clip(v, limit // max(1, len(value))) for v in value[:8]]
        return text + ([f"... {len(value) - 8} more"] if len(value) > 8 else [])
    s = str(value)
    return s if len(s) <= limit else s[:limit] + "..."
