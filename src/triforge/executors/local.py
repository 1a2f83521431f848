"""The fan-out seam: one `Executor` interface, a local thread pool behind it by default.

Problems, rollouts and candidates are mapped over an executor: `LocalPool` here (threads carrying the
run's context: budget, tracer, cache, endpoint limits), or `RayExecutor` (`triforge.executors.ray_executor`,
extra `ray`) on a Ray cluster. A task function gets everything it needs from its item and from the
context the executor installs; it writes its files into `output_dir()`, which the executor maps to the
item's directory under the run directory (on Ray the files are shipped back and written there).

The executor a run uses is carried in a contextvar (`use`); `current()` gives it, or a local pool.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Protocol, TypeVar

from triforge.core import context
from triforge.core.errors import TriforgeError, UserError

T = TypeVar("T")
R = TypeVar("R")

OnDone = Callable[[int, Any], None]
Outputs = Callable[[Any], Path]

KINDS = ("local", "ray")

_output_dir: contextvars.ContextVar[Path | None] = contextvars.ContextVar("triforge_output_dir", default=None)
_gpu: contextvars.ContextVar[int | None] = contextvars.ContextVar("triforge_gpu", default=None)
_current: contextvars.ContextVar[Executor | None] = contextvars.ContextVar("triforge_executor", default=None)


class TaskFailed(TriforgeError):
    """A task whose worker died on every attempt; `reason` says how the last one ended."""

    def __init__(self, reason: str, attempts: int) -> None:
        super().__init__(f"task failed after {attempts} attempt(s): {reason}")
        self.reason = reason
        self.attempts = attempts


class Executor(Protocol):
    """Runs `fn` on every item; results come back in input order.

    `jobs` caps the tasks in flight; `on_done(i, result)` runs in the caller's process as each task
    ends; an exception raised by `fn` is re-raised (the first one, after the others finished) unless
    `return_exceptions`, when it takes the item's place. A task whose worker dies is retried a bounded
    number of times, then its place holds `TaskFailed`. `gpu=True` gives each task one GPU of its own.
    `outputs(item)` names the directory the task's files belong in (see `output_dir`).
    """

    name: str

    def map(self, fn: Callable[[T], R], items: Iterable[T], *, jobs: int = 4, on_done: OnDone | None = None,
            return_exceptions: bool = False, gpu: bool = False, outputs: Outputs | None = None
            ) -> list[R | BaseException]: ...

    def gpu_slots(self) -> int:
        """How many `gpu=True` tasks can run at once (0: none)."""
        ...

    def host(self, obj: T) -> T:
        """One owner for `obj` that the caller and every task reach: `obj` itself on the local pool; on Ray
        a handle whose method calls run, one at a time, on the one copy kept on the driver's machine (so a
        method that checks and counts under its own lock stays atomic across workers). Only methods."""
        ...

    def close(self) -> None: ...


def output_dir() -> Path | None:
    """Where the running task writes its files (None outside a task given `outputs`)."""
    return _output_dir.get()


def assigned_gpu() -> int | None:
    """The GPU index the running task was given on the local pool (None: use what is visible; Ray sets
    CUDA_VISIBLE_DEVICES for its tasks itself)."""
    return _gpu.get()


def visible_gpus() -> int:
    """GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else what `nvidia-smi -L` lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([d for d in env.split(",") if d.strip() and d.strip() != "-1"])
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class LocalPool:
    """Threads in this process, each task in a copy of the caller's context (services reach every task).

    With `gpu=True`, one task per GPU at a time (`gpus`, default: the visible ones), each told its GPU by
    `assigned_gpu()`; no GPU is a clear error.
    """

    name = "local"

    def __init__(self, gpus: int | None = None) -> None:
        self.gpus = gpus

    def map(self, fn: Callable[[T], R], items: Iterable[T], *, jobs: int = 4, on_done: OnDone | None = None,
            return_exceptions: bool = False, gpu: bool = False, outputs: Outputs | None = None
            ) -> list[R | BaseException]:
        items = list(items)
        free: list[int] = []
        cond = threading.Condition()
        if gpu:
            n = self.gpu_slots()
            if n < 1:
                raise UserError("these tasks need a GPU each and this machine shows none (CUDA_VISIBLE_DEVICES, "
                                "nvidia-smi); run where a GPU is visible or use --executor ray on a GPU cluster")
            free, jobs = list(range(n)), n

        def run(item: T) -> R:
            slot = None
            if gpu:
                with cond:
                    cond.wait_for(lambda: bool(free))
                    slot = free.pop(0)
            tokens = [_gpu.set(slot)]
            if outputs is not None:
                tokens.append(_output_dir.set(Path(outputs(item))))
            try:
                return fn(item)
            finally:
                if (budget := context.budget()) is not None and hasattr(budget, "release_thread"):
                    budget.release_thread()  # a place this task checked for and never charged
                _gpu.reset(tokens[0])
                if len(tokens) > 1:
                    _output_dir.reset(tokens[1])
                if slot is not None:
                    with cond:
                        free.append(slot)
                        cond.notify()

        return _thread_map(run, items, jobs, on_done, return_exceptions)

    def gpu_slots(self) -> int:
        return visible_gpus() if self.gpus is None else self.gpus

    def host(self, obj: T) -> T:
        return obj

    def close(self) -> None:
        pass


def _thread_map(fn: Callable[[T], R], items: list[T], jobs: int, on_done: OnDone | None,
                return_exceptions: bool) -> list[Any]:
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
        futures = {pool.submit(contextvars.copy_context().run, fn, item): i for i, item in enumerate(items)}
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


def make_executor(kind: str = "local", *, address: str | None = None, gpus: int | None = None) -> Executor:
    """The executor a CLI option names: `local` (this machine) or `ray` (`address`: an existing cluster;
    none: a Ray instance started on this machine, bound to loopback)."""
    if kind == "local":
        if address:
            raise UserError("--ray-address needs --executor ray")
        return LocalPool(gpus=gpus)
    if kind == "ray":
        try:
            from triforge.executors.ray_executor import RayExecutor
        except ImportError as e:
            raise UserError(f"--executor ray needs Ray ({e}): pip install 'triforge[ray]'") from None
        return RayExecutor(address=address)
    raise UserError(f"--executor must be one of {', '.join(KINDS)}, not {kind!r}")


def current() -> Executor:
    """The executor installed with `use`, or a local pool."""
    return _current.get() or LocalPool()


@contextlib.contextmanager
def use(executor: Executor | None) -> Iterator[None]:
    """Fan-out in this block goes through `executor` (None: leave the current one)."""
    if executor is None:
        yield
        return
    token = _current.set(executor)
    try:
        yield
    finally:
        _current.reset(token)
