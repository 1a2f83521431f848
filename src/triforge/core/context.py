"""The run's shared services (budget, tracer, cache, endpoint limits) carried in contextvars.

Nothing is configured by mutating a module: a run enters `use(...)`, and worker threads started
through `triforge.executors.parallel` inherit the context.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from triforge.core.budget import Budget
    from triforge.core.cache import ResponseCache
    from triforge.core.trace import Tracer

_budget: ContextVar[Budget | None] = ContextVar("triforge_budget", default=None)
_tracer: ContextVar[Tracer | None] = ContextVar("triforge_tracer", default=None)
_cache: ContextVar[ResponseCache | None] = ContextVar("triforge_cache", default=None)
_limits: ContextVar[EndpointLimits | None] = ContextVar("triforge_endpoint_limits", default=None)
_deadline: ContextVar[float | None] = ContextVar("triforge_deadline", default=None)  # time.monotonic()


class EndpointLimits:
    """Caps the number of calls in flight per endpoint (keyed by base URL)."""

    def __init__(self, default_cap: int = 8, caps: dict[str, int] | None = None) -> None:
        self.default_cap = default_cap
        self.caps = dict(caps or {})
        self._sems: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()

    def slot(self, endpoint: str, cap: int | None = None) -> threading.BoundedSemaphore:
        with self._lock:
            sem = self._sems.get(endpoint)
            if sem is None:
                n = cap or self.caps.get(endpoint) or self.default_cap
                sem = self._sems[endpoint] = threading.BoundedSemaphore(max(1, n))
            return sem


def budget() -> Budget | None:
    return _budget.get()


def tracer() -> Tracer | None:
    return _tracer.get()


def cache() -> ResponseCache | None:
    return _cache.get()


def endpoint_limits() -> EndpointLimits | None:
    return _limits.get()


def remaining_s() -> float | None:
    """Seconds left before the wall-time limit of the run in progress (None: no limit): a tool that may run
    long (a kernel cell) bounds its own timeout by it, so the limit holds inside a call, not only between them."""
    d = _deadline.get()
    return None if d is None else max(0.0, d - time.monotonic())


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """A wall-time limit for the block; a nested one never extends an outer one."""
    if seconds is None:
        yield
        return
    new = time.monotonic() + seconds
    outer = _deadline.get()
    token = _deadline.set(new if outer is None else min(outer, new))
    try:
        yield
    finally:
        _deadline.reset(token)


@contextlib.contextmanager
def use(
    *,
    budget: Budget | None = None,
    tracer: Tracer | None = None,
    cache: ResponseCache | None = None,
    limits: EndpointLimits | None = None,
) -> Iterator[None]:
    """Install services for the duration of a block; only the ones given are replaced."""
    tokens = []
    for var, value in ((_budget, budget), (_tracer, tracer), (_cache, cache), (_limits, limits)):
        if value is not None:
            tokens.append((var, var.set(value)))
    try:
        yield
    finally:
        for var, tok in reversed(tokens):
            var.reset(tok)
