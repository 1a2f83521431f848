"""The one ledger of a run: LLM calls, tokens, dollars, wall time, rollouts and evaluations, with hard caps.

Calls are reserved before they are sent, so nothing that runs at once can pass the call cap:
- `check` reserves a place for the calling thread's next call and `charge` turns it into a spent call. A
  place not followed by a charge (a check before work that made no call, a request that failed) is given
  back at the thread's next check, by `release_thread`, or when its thread has ended.
- `take_place` / `release_place` hold a place for a caller elsewhere (the Ray `BudgetActor` holds one per
  worker call); `charge(place=True)` spends it.
- `reserve_call` counts a call at once, before it is sent (a model wrapper that tags calls by kind, or a
  budget hosted by the executor, where threads mean nothing); its usage is charged after with `calls=0`.
Tokens, dollars and wall time are known only after a call: no call starts once one of them is reached.
`keep` holds calls back from the checks (for a phase that must still run, such as a final evaluation).

Rollouts and evaluations are counted in batches: `reserve` takes all or none, `grant` as many as fit.
Tallies by kind (`calls.task`, `rollouts.test`, `sent`) and usage beyond tokens (reasoning or cached
tokens: `charge(..., reasoning_tokens=n)`) are kept in `Spend.kinds` and `Spend.extra`, never capped.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from triforge.core.errors import BudgetExceeded

BATCHED = ("rollouts", "evaluations")  # counters reserved in batches, not per call


@dataclass(frozen=True)
class BudgetLimits:
    """Hard limits; None means unlimited."""

    max_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_usd: float | None = None
    max_wall_s: float | None = None
    max_rollouts: int | None = None
    max_evaluations: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Spend:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    wall_s: float = 0.0
    rollouts: int = 0  # the capped ones (`reserve(..., capped=False)` only tallies its kind)
    evaluations: int = 0
    kinds: dict[str, int] = field(default_factory=dict)  # "calls.task", "rollouts.test", "sent", ...
    extra: dict[str, float] = field(default_factory=dict)  # usage beyond tokens, by the client's names

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Spend:
        """A spend from a stored dict; keys it does not know are left out (older or other run files)."""
        known = {f.name for f in fields(cls)}
        s = cls(**{k: v for k, v in (d or {}).items() if k in known})
        s.kinds, s.extra = dict(s.kinds), dict(s.extra)
        return s

    def kind(self, name: str) -> int:
        return self.kinds.get(name, 0)

    def add(self, other: Spend) -> None:
        """Add another spend's counts (not its wall time)."""
        for name in ("calls", "input_tokens", "output_tokens", "usd", "rollouts", "evaluations"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for k, v in other.kinds.items():
            self.kinds[k] = self.kinds.get(k, 0) + v
        for k, v in other.extra.items():
            self.extra[k] = self.extra.get(k, 0) + v


class Budget:
    """The ledger; every method is atomic under one lock. Picklable, so an executor can host it."""

    def __init__(self, limits: BudgetLimits | None = None, spent: Spend | dict[str, Any] | None = None) -> None:
        self.limits = limits or BudgetLimits()
        self._spent = spent if isinstance(spent, Spend) else Spend.from_dict(spent)
        self.started = time.monotonic() - self._spent.wall_s  # a restored spend keeps its wall time
        self._lock = threading.Lock()
        self._held: set[threading.Thread] = set()  # threads with a call in flight (`check`)
        self._places = 0  # places held for callers elsewhere (`take_place`)
        self._kept: dict[str, float] = {}
        self._kept_for: dict[str, str] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"limits": self.limits, "spent": self.spent(), "kept": dict(self._kept), "for": dict(self._kept_for)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["limits"], state["spent"])  # type: ignore[misc]
        self._kept, self._kept_for = state["kept"], state["for"]

    # reading

    def spent(self) -> Spend:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> Spend:
        s = Spend.from_dict(self._spent.as_dict())
        s.wall_s = time.monotonic() - self.started
        return s

    def exceeded(self) -> str | None:
        """The first limit that stops the next call, in words, or None."""
        with self._lock:
            return self._call_stop(self._snapshot(), 0)

    def left(self, counter: str) -> float | None:
        """What is left of a counter's cap (never below 0), or None when it has none."""
        limit = getattr(self.limits, f"max_{counter}")
        if limit is None:
            return None
        with self._lock:
            return max(0, limit - getattr(self._snapshot(), counter) - self._kept.get(counter, 0))

    def output_cap(self, per_call: int | None) -> int | None:
        """max_tokens for the next call: `per_call`, lowered to the output tokens left."""
        left = self.left("output_tokens")
        if left is None:
            return per_call
        left = max(1, int(left))
        return left if per_call is None else min(per_call, left)

    def _call_stop(self, s: Spend, in_flight: int) -> str | None:
        lim = self.limits
        kept = self._kept.get("calls", 0)
        checks = [
            (lim.max_calls, s.calls + in_flight + kept, "calls"),
            (lim.max_input_tokens, s.input_tokens, "input tokens"),
            (lim.max_output_tokens, s.output_tokens, "output tokens"),
            (lim.max_usd, s.usd, "USD"),
            (lim.max_wall_s, s.wall_s, "wall seconds"),
        ]
        for limit, used, what in checks:
            if limit is not None and used >= limit:
                if what == "calls" and kept:
                    return (f"budget spent: {s.calls + in_flight:g} calls of {limit:g}, "
                            f"{kept:g} kept for {self._kept_for.get('calls') or 'what must still run'}")
                return f"budget spent: {used:g} {what} of {limit:g}"
        return None

    # calls

    def check(self) -> None:
        """Reserve a place for this thread's next call, or raise BudgetExceeded: the calls charged plus the
        places held (by other live threads and for callers elsewhere) count against the call cap."""
        me = threading.current_thread()
        with self._lock:
            self._held = {t for t in self._held if t is not me and t.is_alive()}
            reason = self._call_stop(self._snapshot(), len(self._held) + self._places)
            if reason is None:
                self._held.add(me)
        if reason:
            raise BudgetExceeded(reason)

    def release_thread(self) -> None:
        """Give back the calling thread's place (its task ended without charging it)."""
        with self._lock:
            self._held.discard(threading.current_thread())

    def take_place(self) -> str | None:
        """Hold a place for one call made elsewhere; None when taken, else why there is none."""
        with self._lock:
            self._held = {t for t in self._held if t.is_alive()}
            reason = self._call_stop(self._snapshot(), len(self._held) + self._places)
            if reason is None:
                self._places += 1
            return reason

    def release_place(self) -> None:
        with self._lock:
            self._places = max(0, self._places - 1)

    def reserve_call(self, kind: str | None = None) -> None:
        """Count one call now, before it is sent, or raise BudgetExceeded and count nothing."""
        with self._lock:
            self._held = {t for t in self._held if t.is_alive()}
            reason = self._call_stop(self._snapshot(), len(self._held) + self._places)
            if reason is None:
                self._spent.calls += 1
                if kind:
                    self._tally(f"calls.{kind}", 1)
        if reason:
            raise BudgetExceeded(reason)

    def charge(self, *, calls: int = 1, input_tokens: int = 0, output_tokens: int = 0, usd: float = 0.0,
               place: bool = False, tally: str | None = None, **extra: float) -> None:
        """What a call used; `place`: it held a place from `take_place` (else the thread's, if any); `tally`: a
        kind to count once with it (in the same step). Other keyword arguments are usage beyond tokens
        (reasoning_tokens=..., cached_tokens=...)."""
        with self._lock:
            if place:
                self._places = max(0, self._places - 1)
            else:
                self._held.discard(threading.current_thread())
            s = self._spent
            s.calls += calls
            s.input_tokens += input_tokens
            s.output_tokens += output_tokens
            s.usd += usd
            for k, v in extra.items():
                s.extra[k] = s.extra.get(k, 0) + v
            if tally:
                self._tally(tally, 1)

    def add(self, spend: Spend) -> None:
        """Charge what was spent elsewhere (a worker's share, returned with its result)."""
        with self._lock:
            self._spent.add(spend)

    def keep(self, counter: str, n: float, why: str = "") -> None:
        """Hold `n` of a counter back from every check until `keep(counter, 0)`; `why` names what for."""
        with self._lock:
            self._kept[counter] = max(0, n)
            self._kept_for[counter] = why

    def tally(self, name: str, n: int = 1) -> None:
        """Count something by kind, never capped (e.g. `sent`: calls that reached an endpoint)."""
        with self._lock:
            self._tally(name, n)

    def _tally(self, name: str, n: int) -> None:
        self._spent.kinds[name] = self._spent.kinds.get(name, 0) + n

    # rollouts and evaluations

    def reserve(self, counter: str, n: int, *, kind: str | None = None, capped: bool = True) -> None:
        """Count `n` of a batched counter, or raise BudgetExceeded and count none. Uncapped: only the
        kind is tallied (work that is counted apart from the cap, such as a final test evaluation)."""
        if counter not in BATCHED:
            raise ValueError(f"unknown counter {counter!r}: one of {', '.join(BATCHED)}")
        with self._lock:
            if capped:
                used, limit = getattr(self._spent, counter), getattr(self.limits, f"max_{counter}")
                if limit is not None and used + n + self._kept.get(counter, 0) > limit:
                    raise BudgetExceeded(f"{counter[:-1]} budget: {used} of {limit} used, {n} more needed")
                setattr(self._spent, counter, used + n)
            if kind:
                self._tally(f"{counter}.{kind}", n)

    def grant(self, counter: str, wanted: int, keep: int = 0) -> int:
        """How many of `wanted` may start now, leaving `keep` for later; those granted are counted."""
        if counter not in BATCHED:
            raise ValueError(f"unknown counter {counter!r}: one of {', '.join(BATCHED)}")
        with self._lock:
            used, limit = getattr(self._spent, counter), getattr(self.limits, f"max_{counter}")
            n = wanted if limit is None else max(0, min(wanted, limit - used - keep))
            setattr(self._spent, counter, used + n)
            return n
