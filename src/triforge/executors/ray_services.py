"""The run's services as Ray workers see them: one budget owner, and proxies that ask it.

`BudgetActor` is a plain class that `RayExecutor` runs as one actor on the driver's node. It holds a copy of
the run's `Budget` for the duration of a map (made from the driver's limits and spend when the map starts)
and the driver's response cache file. An actor runs one method at a time, so a reservation is atomic
across workers.

Every worker call first takes a place in the actor's budget (`Budget.take_place`): a call is refused when
the calls charged plus those in flight reach the cap, and charged after the reply. A place not followed by
a charge (a check that was not an LLM call, a request that failed) is released at the thread's next check
or when its task ends. USD and token caps are checked the same way, so they can be passed by at most the
calls in flight.

The same actor keeps the objects a run hosts (`RayExecutor.host`: maestro's search budget, for one): each
one copy, reached through a `Hosted` handle whose method calls run there one at a time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from triforge.core.budget import Budget, BudgetLimits, Spend
from triforge.core.cache import CacheMiss, ResponseCache
from triforge.core.errors import BudgetExceeded
from triforge.core.trace import Tracer, redact


@dataclass(frozen=True)
class WorkerServices:
    """What a task needs to rebuild the run's context on a worker (all plain data or actor handles)."""

    actor: Any = None  # the BudgetActor, when the run has a budget or a cache
    limits: BudgetLimits | None = None
    cache: bool = False
    trace_id: str | None = None
    parent_span: str | None = None
    agent: str | None = None
    endpoint_cap: int = 8


class BudgetActor:
    """The one owner of the run's budget (and of the cache file) while tasks run on other processes or hosts."""

    def __init__(self) -> None:
        self.budget: Budget | None = None
        self.cache: ResponseCache | None = None
        self.hosted: dict[int, Any] = {}

    def reset(self, budget: Budget | None, cache_path: str | None, cache_mode: str | None) -> None:
        self.budget = budget  # a copy of the driver's
        if cache_path is None:
            self._close_cache()
        elif self.cache is None or str(self.cache.path) != cache_path or str(self.cache.mode) != cache_mode:
            self._close_cache()
            self.cache = ResponseCache(cache_path, cache_mode or "rw")

    def _close_cache(self) -> None:
        if self.cache is not None:
            self.cache.close()
            self.cache = None

    def reserve(self) -> str | None:
        """Take a place for one call, or say why there is none."""
        return self.budget.take_place() if self.budget is not None else None

    def release(self) -> None:
        if self.budget is not None:
            self.budget.release_place()

    def charge(self, usage: dict[str, Any], reserved: bool) -> None:
        if self.budget is not None:
            self.budget.charge(place=reserved, **usage)

    def exceeded(self) -> str | None:
        return self.budget.exceeded() if self.budget is not None else None

    def spend(self) -> dict[str, Any]:
        return (self.budget.spent() if self.budget is not None else Spend()).as_dict()

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
    """A handle on an object kept in the budget actor: `h.method(...)` runs `method` there and returns its
    result (or raises its exception). Picklable, so tasks carry it to their workers."""

    def __init__(self, actor: Any, key: int, kind: str) -> None:
        self._actor, self._key, self._kind = actor, key, kind

    def __getattr__(self, method: str) -> Any:
        if method.startswith("__"):
            raise AttributeError(method)

        def call(*args: Any, **kwargs: Any) -> Any:
            ok, value = _ray().get(self._actor.call.remote(self._key, method, args, kwargs))
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
    budget actor. `delta()` is what this task spent, charged to the driver's budget when it returns."""

    def __init__(self, actor: Any, limits: BudgetLimits) -> None:
        self.limits = limits
        self._actor = actor
        self._held = threading.local()
        self._lock = threading.Lock()
        self._open = 0
        self._delta = Budget()  # counts only: no limits

    def _drop_held(self) -> None:
        if getattr(self._held, "on", False):
            self._held.on = False
            with self._lock:
                self._open -= 1
            self._actor.release.remote()  # an actor runs one caller's calls in order: before the next reserve

    def check(self) -> None:
        self._drop_held()
        reason = _ray().get(self._actor.reserve.remote())
        if reason:
            raise BudgetExceeded(reason)
        self._held.on = True
        with self._lock:
            self._open += 1

    def charge(self, *, calls: int = 1, input_tokens: int = 0, output_tokens: int = 0, usd: float = 0.0,
               **extra: float) -> None:
        reserved = bool(getattr(self._held, "on", False))
        if reserved:
            self._held.on = False
            with self._lock:
                self._open -= 1
        usage = {"calls": calls, "input_tokens": input_tokens, "output_tokens": output_tokens, "usd": usd, **extra}
        _ray().get(self._actor.charge.remote(usage, reserved))
        self._delta.charge(**usage)

    def exceeded(self) -> str | None:
        return _ray().get(self._actor.exceeded.remote())

    def release_thread(self) -> None:
        """Give back the calling thread's place (a task of a pool inside this task ended)."""
        self._drop_held()

    def spent(self) -> Spend:
        return Spend.from_dict(_ray().get(self._actor.spend.remote()))

    def release(self) -> None:
        """Give back every place this task still holds (its threads are done)."""
        with self._lock:
            n, self._open = self._open, 0
        for _ in range(n):
            self._actor.release.remote()

    def delta(self) -> dict[str, Any]:
        d = self._delta.spent().as_dict()
        d["wall_s"] = 0.0
        return d


class RemoteCache:
    """A worker's response cache: reads and writes go to the driver's cache file through the budget actor."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    def get(self, request: dict[str, Any], sample: int = 0) -> dict[str, Any] | None:
        ok, value = _ray().get(self._actor.cache_get.remote(request, sample))
        if not ok:
            raise CacheMiss(value)
        return value

    def put(self, request: dict[str, Any], response: dict[str, Any], sample: int = 0) -> None:
        _ray().get(self._actor.cache_put.remote(request, response, sample))


class SpanBuffer(Tracer):
    """A tracer that keeps a task's spans (under the run's trace id) to send back with its result."""

    def __init__(self, trace_id: str) -> None:  # no file: the driver's tracer writes the spans
        self.trace_id = trace_id
        self._lock = threading.Lock()
        self.records: list[dict[str, Any]] = []

    def emit(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.records.append(redact(record))
