"""A thread-safe ledger of LLM calls, tokens, dollars and wall time with hard limits.

`check` reserves a place for the calling thread's next call and `charge` turns it into a spent call, so
threads checking at once cannot pass a call cap by the calls in flight (the Ray ledger actor does the same
across workers). A place not followed by a charge (a check before work that made no call, a request that
failed) is given back at the thread's next check, by `release_thread`, or when its thread has ended.
"""

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
    _held: set[threading.Thread] = field(default_factory=set, repr=False)  # threads with a call in flight

    def spent(self) -> Spend:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> Spend:
        s = Spend(**self._spent.as_dict())
        s.wall_s = time.monotonic() - self.started
        return s

    def exceeded(self) -> str | None:
        """The first limit reached, in words, or None."""
        return self._first_limit(self.spent(), 0)

    def _first_limit(self, s: Spend, in_flight: int) -> str | None:
        lim = self.limits
        checks = [
            (lim.max_calls, s.calls + in_flight, "calls"),
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
        """Reserve a place for this thread's next call, or raise BudgetExceeded: the calls charged plus the
        places other live threads hold count against the call cap."""
        me = threading.current_thread()
        with self._lock:
            self._held = {t for t in self._held if t is not me and t.is_alive()}
            reason = self._first_limit(self._snapshot(), len(self._held))
            if reason is None:
                self._held.add(me)
        if reason:
            raise BudgetExceeded(reason)

    def release_thread(self) -> None:
        """Give back the calling thread's place (its task ended without charging it)."""
        with self._lock:
            self._held.discard(threading.current_thread())

    def charge(self, *, calls: int = 1, input_tokens: int = 0, output_tokens: int = 0, usd: float = 0.0) -> None:
        with self._lock:
            self._held.discard(threading.current_thread())
            self._spent.calls += calls
            self._spent.input_tokens += input_tokens
            self._spent.output_tokens += output_tokens
            self._spent.usd += usd
