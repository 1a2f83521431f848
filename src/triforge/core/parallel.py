"""Fan-out over a thread pool that carries the run's context (budget, tracer, cache, limits)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def pmap(
    fn: Callable[[T], R],
    items: Iterable[T],
    *,
    jobs: int = 4,
    on_done: Callable[[int, R | BaseException], None] | None = None,
    return_exceptions: bool = False,
) -> list[R | BaseException]:
    """Apply `fn` to every item with up to `jobs` threads; results in input order.

    Each task runs in a copy of the caller's context, so services installed with
    `triforge.core.context.use` reach every worker. Calls in flight to one endpoint are capped
    separately by `EndpointLimits`.
    """
    items = list(items)
    results: list[Any] = [None] * len(items)
    if jobs <= 1:
        for i, item in enumerate(items):
            try:
                results[i] = fn(item)
            except Exception as e:
                if not return_exceptions:
                    raise
                results[i] = e
            if on_done:
                on_done(i, results[i])
        return results
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(contextvars.copy_context().run, fn, item): i for i, item in enumerate(items)
        }
        first_error: BaseException | None = None
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                results[i] = fut.result()
            except Exception as e:
                if not return_exceptions and first_error is None:
                    first_error = e
                results[i] = e
            if on_done:
                on_done(i, results[i])
        if first_error is not None:
            raise first_error
    return results
