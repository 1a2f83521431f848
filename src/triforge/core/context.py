"""The run's shared services (budget, tracer, cache, endpoint limits) carried in contextvars.

Nothing is configured by mutating a module: a run enters `use(...)`, and worker threads started
through `triforge.executors.parallel` inherit the context.
"""

from __future__ import annotations

import contextlib
import threading
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
