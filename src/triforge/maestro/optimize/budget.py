"""The search's budget: a core `Budget` configured for a search, and the model wrapper that spends it.

A rollout is one program run on one example. Rollouts are reserved before an evaluation starts (all of
a batch or none: `Budget.reserve("rollouts", ...)`), and an LLM call is counted before it is sent
(`Budget.reserve_call`), so a cap is never overshot, whatever runs in parallel. Calls are counted as made
by the program or the optimizer, whether the response cache answered them or not, so a resumed run
(replayed from the cache) counts exactly what the first run counted; the `sent` tally counts the ones
that reached an endpoint.

`--max-calls` caps every call the command makes, the final test evaluation's included: while the search
runs, the calls the test evaluation is expected to need are kept back (`keep_for_test`).

The budget has one owner: on an executor that runs rollouts in other processes (Ray) it lives where the
executor hosts it (`Executor.host`) and every caller, the workers' task models included, reaches it by
method calls only, each atomic there.
"""

from __future__ import annotations

import math
from typing import Any

from triforge.core.budget import Budget, BudgetLimits, Spend
from triforge.core.llm import LLM, Completion

ROLLOUT_KINDS = ("train", "val", "test")  # test rollouts are counted apart from the rollout cap
CALL_KINDS = ("task", "reflection")
TEST_MARGIN = 1.25  # the test evaluation's calls are estimated from the search's calls per rollout


def search_budget(max_rollouts: int | None = None, max_calls: int | None = None) -> Budget:
    """`max_rollouts` caps train+val rollouts, `max_calls` every LLM call of the command."""
    return Budget(BudgetLimits(max_calls=max_calls, max_rollouts=max_rollouts))


def reserve_rollouts(budget: Budget, n: int, kind: str) -> None:
    """Count `n` rollouts of `kind`, or raise BudgetExceeded and count none (test rollouts: never)."""
    if kind not in ROLLOUT_KINDS:
        raise ValueError(f"unknown rollout kind {kind!r}")
    budget.reserve("rollouts", n, kind=kind, capped=kind != "test")


def keep_for_test(budget: Budget, test_rollouts: int) -> int:
    """Keep back from the search the calls `test_rollouts` are expected to need (at least one each, and
    the task calls per rollout seen so far, with a margin); returns the number kept."""
    s = budget.spent()
    per = s.kind("calls.task") / s.rollouts if s.rollouts else 1.0
    n = math.ceil(per * TEST_MARGIN * test_rollouts) if test_rollouts else 0
    budget.keep("calls", n, "the final test evaluation")
    return n


def spend_summary(s: Spend) -> dict[str, Any]:
    """The search's spend by kind, as results.json and the reports show it."""
    return {"rollouts": {k: s.kind(f"rollouts.{k}") for k in ROLLOUT_KINDS},
            "calls": {k: s.kind(f"calls.{k}") for k in CALL_KINDS}, "sent": s.kind("sent"),
            "input_tokens": s.input_tokens, "output_tokens": s.output_tokens, "usd": round(s.usd, 8),
            "search_rollouts": s.rollouts, "total_calls": s.calls, **({"extra": s.extra} if s.extra else {})}


class BudgetedLLM:
    """An LLM whose every call is counted in the budget, by kind, before it is sent, then charged."""

    def __init__(self, inner: LLM, budget: Budget, kind: str) -> None:
        if kind not in CALL_KINDS:
            raise ValueError(f"unknown call kind {kind!r}")
        self.inner, self.budget, self.kind = inner, budget, kind
        self.alias, self.config = inner.alias, inner.config

    def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        self.budget.reserve_call(self.kind)
        comp = self.inner.complete(messages, **kwargs)
        # a cached completion carries no cost; price it from its usage so a replay charges the same
        u = comp.usage
        usd = self.config.cost_usd(u.input_tokens, u.output_tokens, u.cached_input_tokens)
        extra = {k: v for k, v in (("reasoning_tokens", u.reasoning_tokens),
                                   ("cached_input_tokens", u.cached_input_tokens)) if v}
        self.budget.charge(calls=0, input_tokens=u.input_tokens, output_tokens=u.output_tokens, usd=usd,
                           tally=None if comp.cached else "sent", **extra)
        return comp

    def text(self, prompt: str, *, sample: int = 0, max_tokens: int | None = None) -> str:
        """One user message in, the reply's text out (what reflection uses)."""
        comp = self.complete([{"role": "user", "content": prompt}], sample=sample, max_tokens=max_tokens)
        return comp.content or ""
