"""One ledger for a search: rollouts, LLM calls, tokens and dollars, with hard caps checked before spending.

A rollout is one program run on one example. Rollouts are reserved before an evaluation starts
(all of a batch or none), and an LLM call is reserved before it is sent, under one lock: a cap is
never overshot, whatever runs in parallel. Calls are counted as made by the program or the
optimizer, whether the response cache answered them or not, so a resumed run (replayed from the
cache) counts exactly what the first run counted; `sent` counts the ones that reached an endpoint.

The ledger has one owner: on an executor that runs rollouts in other processes (Ray) it lives where the
executor hosts it (`Executor.host`) and every caller, the workers' task models included, reaches it by
method calls only, each atomic there.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from triforge.core.errors import BudgetExceeded
from triforge.core.llm import LLM, Completion

ROLLOUT_KINDS = ("train", "val", "test")
CALL_KINDS = ("task", "reflection")


@dataclass
class Spent:
    rollouts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLLOUT_KINDS, 0))
    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CALL_KINDS, 0))
    sent: int = 0  # calls that reached an endpoint (not answered by the cache)
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0

    @property
    def search_rollouts(self) -> int:
        """Rollouts the budget caps: training (minibatches included) and validation."""
        return self.rollouts["train"] + self.rollouts["val"]

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["usd"] = round(self.usd, 8)
        d["search_rollouts"] = self.search_rollouts
        return d


class Ledger:
    """Counts everything the search spends; `max_rollouts` caps train+val rollouts, `max_calls` all calls.

    Test rollouts (the final report's evaluation) are counted but not capped, and their calls are
    not capped either: the search's caps are about the search.
    """

    def __init__(self, max_rollouts: int | None = None, max_calls: int | None = None) -> None:
        self.max_rollouts, self.max_calls = max_rollouts, max_calls
        self._spent = Spent()
        self._lock = threading.Lock()
        self.capped = True  # False while the final test evaluation runs

    def __getstate__(self) -> dict[str, Any]:  # sent once to where the executor hosts it
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def uncap(self) -> None:
        """Stop capping calls: the final test evaluation is outside the search's caps, and counted apart."""
        with self._lock:
            self.capped = False

    def spent(self) -> Spent:
        with self._lock:
            s = self._spent
            return Spent(dict(s.rollouts), dict(s.calls), s.sent, s.input_tokens, s.output_tokens, s.usd)

    def rollouts_left(self) -> int | None:
        if self.max_rollouts is None:
            return None
        with self._lock:
            return self.max_rollouts - self._spent.search_rollouts

    def reserve_rollouts(self, n: int, kind: str) -> None:
        """Count `n` rollouts of `kind`, or raise BudgetExceeded and count none."""
        if kind not in ROLLOUT_KINDS:
            raise ValueError(f"unknown rollout kind {kind!r}")
        with self._lock:
            s = self._spent
            if kind != "test" and self.max_rollouts is not None and s.search_rollouts + n > self.max_rollouts:
                raise BudgetExceeded(f"rollout budget: {s.search_rollouts} of {self.max_rollouts} used, "
                                     f"{n} more needed")
            s.rollouts[kind] += n

    def reserve_call(self, kind: str) -> None:
        """Count one LLM call, or raise BudgetExceeded (before anything is sent) when the cap is reached."""
        with self._lock:
            s = self._spent
            if self.capped and self.max_calls is not None and s.total_calls >= self.max_calls:
                raise BudgetExceeded(f"call cap: {s.total_calls} of {self.max_calls} LLM calls used")
            s.calls[kind] += 1

    def charge(self, comp: Completion, usd: float) -> None:
        self.charge_usage(comp.usage.input_tokens, comp.usage.output_tokens, usd, comp.cached)

    def charge_usage(self, input_tokens: int, output_tokens: int, usd: float, cached: bool) -> None:
        """What a reserved call used (plain numbers: a worker sends them to the ledger's owner)."""
        with self._lock:
            s = self._spent
            s.input_tokens += input_tokens
            s.output_tokens += output_tokens
            s.usd += usd
            s.sent += 0 if cached else 1


class LedgerLLM:
    """An LLM whose every call is reserved in the ledger before it is sent, then charged."""

    def __init__(self, inner: LLM, ledger: Ledger, kind: str) -> None:
        if kind not in CALL_KINDS:
            raise ValueError(f"unknown call kind {kind!r}")
        self.inner, self.ledger, self.kind = inner, ledger, kind
        self.alias, self.config = inner.alias, inner.config

    def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        self.ledger.reserve_call(self.kind)
        comp = self.inner.complete(messages, **kwargs)
        # a cached completion carries no cost; price it from its usage so a replay charges the same
        usd = self.config.cost_usd(comp.usage.input_tokens, comp.usage.output_tokens)
        self.ledger.charge_usage(comp.usage.input_tokens, comp.usage.output_tokens, usd, comp.cached)
        return comp

    def text(self, prompt: str, *, sample: int = 0, max_tokens: int | None = None) -> str:
        """One user message in, the reply's text out (what reflection uses)."""
        comp = self.complete([{"role": "user", "content": prompt}], sample=sample, max_tokens=max_tokens)
        return comp.content or ""
