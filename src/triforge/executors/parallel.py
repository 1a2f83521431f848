"""`pmap`: fan-out over threads in this process (`triforge.executors.local.LocalPool`).

For call sites whose tasks hold in-process objects (locks, workers, pools) and so can only run here;
fan-out that may run on a cluster goes through `triforge.executors.local.current()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from triforge.executors.local import LocalPool

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
    return LocalPool().map(fn, items, jobs=jobs, on_done=on_done, return_exceptions=return_exceptions)
