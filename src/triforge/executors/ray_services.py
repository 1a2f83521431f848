"""The run's services as Ray workers see them: one ledger owner, and proxies that ask it.

`Ledger` is a plain class that `RayExecutor` runs as one actor on the driver's node. It holds the budget
for the duration of a map (reset from the driver's `Budget` when the map starts) and the driver's
response cache file. An actor runs one method at a time, so a reservation is atomic across workers.

Calls are counted as the local `Budget` counts them (when charged, after the reply); what keeps workers
from overshooting a cap is the reservation each call takes first: a call is refused when the calls
charged plus those in flight reach the cap. A reservation not followed by a charge (a check that was not
an LLM call, a request that failed) is released at the thread's next check or when its task ends.
USD and token caps are checked the same way, so they can be passed by at most the calls in flight.

The same actor keeps the objects a run hosts (`RayExecutor.host`: maestro's search ledger, for one): each
one copy, reached through a `Hosted` handle whose method calls run there one at a time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from triforge.core.budget import BudgetLimits, Spend
from triforge.core.cache import CacheMiss, ResponseCache
from triforge.core.errors import BudgetExceeded
from triforge.core.trace import Tracer, redact


@dataclass(frozen=True)
class WorkerServices:
    """What a task needs to rebuild the run's context on a worker (all plain data or actor handles)."""

    ledger: Any = None  # the Ledger actor, when the run has a budget or a cache
    limits: BudgetLimits | None = None
    cache: bool = False
    trace_id: str | None = None
    parent_span: str | None = None
    agent: str | None = None
    endpoint_cap: int = 8


class Ledger:
    """The one owner of the budget (and of the cache file) while tasks run on other processes or hosts."""

    def __init__(self) -> None:
        self.limits: BudgetLimits | None = None
        self.spent = Spend()
        self.in_flight = 0
        self.reset_at = time.monotonic()
        self.cache: ResponseCache | None = None
        self.hosted: dict[int, Any] = {}

    def reset(self, limits: BudgetLimits | None, spent: dict[str, float] | None, cache_path: str | None,
              cache_mode: str | None) -> None:
        self.limits = limits
        self.spent = Spend(**spent) if spent else Spend()
        self.in_flight = 0
        self.reset_at = time.monotonic()
        if cache_path is None:
            self._close_cache()
        elif self.cache is None or str(self.cache.path) != cache_path or str(self.cache.mode) != cache_mode:
            self._close_cache()
            self.cache = ResponseCache(cache_path, cache_mode or "rw")

    def _close_cache(self) -> None:
        if self.cache is not None:
            self.cache.close()
            self.cache = None

    def _reason(self, in_flight: int) -> str | None:
        lim, s = self.limits, self.spent
        if lim is None:
            return None
        wall = s.wall_s + time.monotonic() - self.reset_at
        checks = [(lim.max_calls, s.calls + in_flight, "calls"), (lim.max_input_tokens, s.input_tokens, "input tokens"),
                  (lim.max_output_tokens, s.output_tokens, "output tokens"), (lim.max_usd, s.usd, "USD"),
                  (lim.max_wall_s, wall, "wall seconds")]
        for limit, used, what in checks:
            if limit is not None and used >= limit:
                return f"budget spent: {used:g} {what} of {limit:g}"
        return None

    def reserve(self) -> str | None:
        """Take a place for one call, or say why there is none."""
        reason = self._reason(self.in_flight)
        if reason is None:
            self.in_flight += 1
        return reason

    def release(self) -> None:
        self.in_flight = max(0, self.in_flight - 1)

    def charge(self, calls: int, input_tokens: int, output_tokens: int, usd: float, reserved: bool) -> None:
        if reserved:
            self.release()
        self.spent.calls += calls
        self.spent.input_tokens += input_tokens
        self.spent.output_tokens += output_tokens
        self.spent.usd += usd

    def exceeded(self) -> str | None:
        return self._reason(0)

    def spend(self) -> dict[str, float]:
        d = self.spent.as_dict()
        d["wall_s"] = self.spent.wall_s + time.monotonic() - self.reset_at
        return d

    def cache_get(self, request: dict[str, Any], sample: int) -> tuple[bool, Any]:
        if self.cache is None:
            return True, None
        try:
            return True, self.cache.get(request, sample)
        except CacheMiss as e:
            return False, str(e)

    def cache_put(self, request: dict[str, Any], response: dict[str, Any], sample: int) -> None:
        if self.cache is not None:
            self.cache.put(request, response, sample)

    def host(self, key: int, obj: Any) -> None:
        self.hosted[key] = obj

    def call(self, key: int, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
        """Run one method of a hosted object; an exception comes back as a value, raised by the caller."""
        try:
            return True, getattr(self.hosted[key], method)(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - BudgetExceeded and the like belong to the caller
            return False, e


class Hosted:
    """A handle on an object kept in the ledger actor: `h.method(...)` runs `method` there and returns its
    result (or raises its exception). Picklable, so tasks carry it to their workers."""

    def __init__(self, ledger: Any, key: int, kind: str) -> None:
        self._ledger, self._key, self._kind = ledger, key, kind

    def __getattr__(self, method: str) -> Any:
        if method.startswith("__"):
            raise AttributeError(method)

        def call(*args: Any, **kwargs: Any) -> Any:
            ok, value = _ray().get(self._ledger.call.remote(self._key, method, args, kwargs))
            if not ok:
                raise value
            return value

        return call

    def __repr__(self) -> str:
        return f"<hosted {self._kind} #{self._key}>"


def _ray() -> Any:
    import ray

    return ray


class RemoteBudget:
    """A worker's view of the budget: the `Budget` methods the LLM client and the loops use, asked of the
    ledger actor. `delta()` is what this task spent, charged to the driver's budget when it returns."""

    def __init__(self, ledger: Any, limits: BudgetLimits) -> None:
        self.limits = limits
        self._ledger = ledger
        self._held = threading.local()
        self._lock = threading.Lock()
        self._open = 0
        self._delta = Spend()

    def _drop_held(self) -> None:
        if getattr(self._held, "on", False):
            self._held.on = False
            with self._lock:
                self._open -= 1
            self._ledger.release.remote()  # an actor runs one caller's calls in order: before the next reserve

    def check(self) -> None:
        self._drop_held()
        reason = _ray().get(self._ledger.reserve.remote())
        if reason:
            raise BudgetExceeded(reason)
        self._held.on = True
        with self._lock:
            self._open += 1

    def charge(self, *, calls: int = 1, input_tokens: int = 0, output_tokens: int = 0, usd: float = 0.0) -> None:
        reserved = bool(getattr(self._held, "on", False))
        if reserved:
            self._held.on = False
            with self._lock:
                self._open -= 1
        _ray().get(self._ledger.charge.remote(calls, input_tokens, output_tokens, usd, reserved))
        with self._lock:
            d = self._delta
            d.calls, d.input_tokens, d.output_tokens = d.calls + calls, d.input_tokens + input_tokens, \
                d.output_tokens + output_tokens
            d.usd += usd

    def exceeded(self) -> str | None:
        return _ray().get(self._ledger.exceeded.remote())

    def release_thread(self) -> None:
        """Give back the calling thread's place (a task of a pool inside this task ended)."""
        self._drop_held()

    def spent(self) -> Spend:
        return Spend(**_ray().get(self._ledger.spend.remote()))

    def release(self) -> None:
        """Give back every place this task still holds (its threads are done)."""
        with self._lock:
            n, self._open = self._open, 0
        for _ in range(n):
            self._ledger.release.remote()

    def delta(self) -> dict[str, float]:
        d = self._delta
        return {"calls": d.calls, "input_tokens": d.input_tokens, "output_tokens": d.output_tokens, "usd": d.usd}


class RemoteCache:
    """A worker's response cache: reads and writes go to the driver's cache file through the ledger actor."""

    def __init__(self, ledger: Any) -> None:
        self._ledger = ledger

    def get(self, request: dict[str, Any], sample: int = 0) -> dict[str, Any] | None:
        ok, value = _ray().get(self._ledger.cache_get.remote(request, sample))
        if not ok:
            raise CacheMiss(value)
        return value

    def put(self, request: dict[str, Any], response: dict[str, Any], sample: int = 0) -> None:
        _ray().get(self._ledger.cache_put.remote(request, response, sample))


class SpanBuffer(Tracer):
    """A tracer that keeps a task's spans (under the run's trace id) to send back with its result."""

    def __init__(self, trace_id: str) -> None:  # no file: the driver's tracer writes the spans
        self.trace_id = trace_id
        self._lock = threading.Lock()
        self.records: list[dict[str, Any]] = []

    def emit(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.records.append(redact(record))
