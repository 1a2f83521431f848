"""A thread-safe ledger of LLM calls, tokens, dollars and wall time with hard limits."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field

from triforge.core.errors import BudgetExceeded


@dataclass(frozen=True)
class BudgetLimits:
    """Hard limits; None means unlimited."""

    max_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_usd: float | None = None
    max_wall_s: float | None = None


@dataclass
class Spend:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass
class Budget:
    """Checked before every call (`check`), charged after it (`charge`)."""

    limits: BudgetLimits = field(default_factory=BudgetLimits)
    started: float = field(default_factory=time.monotonic)
    _spent: Spend = field(default_factory=Spend)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def spent(self) -> Spend:
        with self._lock:
            s = Spend(**self._spent.as_dict())
        s.wall_s = time.monotonic() - self.started
        return s

    def exceeded(self) -> str | None:
        """The first limit reached, in words, or None."""
        s, lim = self.spent(), self.limits
        checks = [
            (lim.max_calls, s.calls, "calls"),
            (lim.max_input_tokens, s.input_tokens, "input tokens"),
            (lim.max_output_tokens, s.output_tokens, "output tokens"),
            (lim.max_usd, s.usd, "USD"),
            (lim.max_wall_s, s.wall_s, "wall seconds"),
        ]
        for limit, used, what in checks:
            if limit is not None and used >= limit:
                return f"budget spent: {used:g} {what} of {limit:g}"
        return None

    def check(self) -> None:
        reason = self.exceeded()
        if reason:
            raise BudgetExceeded(reason)

    def charge(self, *, calls: int = 1, input_tokens: int = 0, output_tokens: int = 0, usd: float = 0.0) -> None:
        with self._lock:
            self._spent.calls += calls
            self._spent.input_tokens += input_tokens
            self._spent.output_tokens += output_tokens
            self._spent.usd += usd
