"""One ledger for an optimize run: LLM calls, tokens and dollars (the core budget) and GPU evaluations.

Limits are hard. Calls and evaluations never overshoot: a call is refused before it is sent, a batch of
evaluations is cut to what is left. Tokens and dollars are known only after a call, so the ledger stops
before the next call once they are reached and caps each call's output at the output tokens left.
The spend survives a resume: it is stored in the run's state and charged again on load.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from triforge.core.budget import Budget, BudgetLimits


@dataclass(frozen=True)
class LedgerLimits:
    max_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_usd: float | None = None
    max_evaluations: int | None = None


class Ledger:
    def __init__(self, limits: LedgerLimits, spent: dict[str, Any] | None = None) -> None:
        self.limits = limits
        self.budget = Budget(BudgetLimits(max_calls=limits.max_calls, max_input_tokens=limits.max_input_tokens,
                                          max_output_tokens=limits.max_output_tokens, max_usd=limits.max_usd))
        spent = spent or {}
        if spent.get("calls"):
            self.budget.charge(calls=int(spent["calls"]), input_tokens=int(spent.get("input_tokens", 0)),
                               output_tokens=int(spent.get("output_tokens", 0)), usd=float(spent.get("usd", 0.0)))
        self.evaluations = int(spent.get("evaluations", 0))

    def llm_exhausted(self) -> str | None:
        r = self.budget.exceeded()
        return None if r is None or "wall" in r else r

    def output_cap(self, per_call: int | None) -> int | None:
        """max_tokens for the next call: the configured cap, lowered to the output tokens left."""
        if self.limits.max_output_tokens is None:
            return per_call
        left = max(1, self.limits.max_output_tokens - self.budget.spent().output_tokens)
        return left if per_call is None else min(per_call, left)

    def evaluations_left(self) -> int | None:
        if self.limits.max_evaluations is None:
            return None
        return max(0, self.limits.max_evaluations - self.evaluations)

    def grant(self, wanted: int, reserve: int = 0) -> int:
        """How many of `wanted` evaluations may start now, keeping `reserve` for the final check."""
        left = self.evaluations_left()
        n = wanted if left is None else max(0, min(wanted, left - reserve))
        self.evaluations += n
        return n

    def spent(self) -> dict[str, Any]:
        s = self.budget.spent()
        return {"calls": s.calls, "input_tokens": s.input_tokens, "output_tokens": s.output_tokens,
                "usd": round(s.usd, 6), "evaluations": self.evaluations}

    def limits_dict(self) -> dict[str, Any]:
        return asdict(self.limits)
