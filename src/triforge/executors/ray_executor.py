"""`RayExecutor`: the executor seam on a Ray cluster (extra `ray`).

Each task carries its function, its item and a `WorkerServices` record; the worker rebuilds the run's
services from it: the budget becomes `RemoteBudget` (every LLM call first reserves a place with the one
`BudgetActor`, so no number of workers can pass the cap), the response cache `RemoteCache` (reads and
writes go to the cache file on the driver's machine, through the same actor), the tracer a `SpanBuffer`
(spans come back with the result and are appended to the run's trace.jsonl). Files a task writes in
`output_dir()` come back with it and are written into the item's directory under the run directory.

A worker that dies mid-task (killed, out of memory, node lost) has its task run again up to `retries`
times; then the task's place holds `TaskFailed` with the reason. Tasks that ask for a GPU get one each
(`num_gpus=1`); a cluster without one is refused before anything is submitted.
"""

from __future__ import annotations

import os
import pickle
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triforge.core import context
from triforge.core import trace as trace_mod
from triforge.core.budget import Spend
from triforge.core.errors import UserError
from triforge.executors.local import OnDone, Outputs, TaskFailed, _gpu, _output_dir
from triforge.executors.ray_services import (
    BudgetActor,
    Hosted,
    RemoteBudget,
    RemoteCache,
    SpanBuffer,
    WorkerServices,
)

# The transcript of a task's files that is appended to rather than replaced when written back.
APPENDED = {"trace.jsonl"}


def _import_ray(local: bool) -> Any:
    """Ray, imported so that a local instance binds to loopback only (its servers listen on the node IP,
    which Ray takes to be loopback when clusters are off for this process)."""
    if local and "ray" not in sys.modules:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    return ray


def _check_reachable(address: str) -> None:
    """Fail in one line when nothing answers at HOST:PORT (Ray itself retries for minutes)."""
    if "://" in address or address == "auto":
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except (OSError, ValueError) as e:
        raise UserError(f"no Ray cluster answers at {address} ({e}); start one there with `ray start --head` "
                        "or fix --ray-address (HOST:PORT)") from None


@dataclass
class _Envelope:
    value: Any = None
    error: BaseException | None = None
    spans: list[dict[str, Any]] | None = None
    files: dict[str, bytes] | None = None
    spend: dict[str, float] | None = None


def _portable(e: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001 - an exception that does not survive pickling is sent as text
        return RuntimeError(f"{type(e).__name__}: {e}")


def run_task(fn: Callable[[Any], Any], item: Any, services: WorkerServices, with_outputs: bool) -> _Envelope:
    """The body of every Ray task: install the services, run `fn(item)`, pack what comes back."""
    budget = RemoteBudget(services.actor, services.limits) if services.actor is not None and services.limits \
        else None
    cache = RemoteCache(services.actor) if services.actor is not None and services.cache else None
    tracer = SpanBuffer(services.trace_id) if services.trace_id else None
    scratch = Path(tempfile.mkdtemp(prefix="triforge-task-")) if with_outputs else None
    tokens = [(trace_mod._current_span, trace_mod._current_span.set(services.parent_span)),
              (trace_mod._current_agent, trace_mod._current_agent.set(services.agent)),
              (_output_dir, _output_dir.set(scratch)), (_gpu, _gpu.set(None))]
    env = _Envelope()
    try:
        with context.use(budget=budget, cache=cache, tracer=tracer,  # type: ignore[arg-type]
                         limits=context.EndpointLimits(default_cap=services.endpoint_cap)):
            try:
                env.value = fn(item)
            except Exception as e:  # noqa: BLE001 - raised in the caller's process, as on the local pool
                env.error = _portable(e)
    finally:
        for var, tok in reversed(tokens):
            var.reset(tok)
        if budget is not None:
            budget.release()
            env.spend = budget.delta()
        if tracer is not None:
            env.spans = tracer.records
        if scratch is not None:
            env.files = {str(p.relative_to(scratch)): p.read_bytes() for p in sorted(scratch.rglob("*"))
                         if p.is_file()}
            shutil.rmtree(scratch, ignore_errors=True)
    return env


def write_back(files: dict[str, bytes], dest: Path) -> None:
    """Write a task's files into its directory under the run directory (a transcript is appended)."""
    for rel, data in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab" if path.name in APPENDED else "wb") as f:
            f.write(data)


class RayExecutor:
    """Tasks on a Ray cluster: an existing one (`address`), or one started here on loopback."""

    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None, retries: int = 2) -> None:
        ray = self._ray = _import_ray(local=address is None)
        self.retries = retries
        self._owned = False
        if not ray.is_initialized():
            if address:
                _check_reachable(address)
            try:
                if address:
                    ray.init(address=address, include_dashboard=False, log_to_driver=False,
                             logging_level="WARNING")
                else:
                    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                             logging_level="WARNING", _node_ip_address="127.0.0.1")
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise UserError(f"cannot start or reach Ray{f' at {address}' if address else ''}: {e}") from None
            self._owned = True
        self._task = ray.remote(max_retries=0)(run_task)
        self._actor: Any = None
        self._hosted = 0

    def _services(self) -> WorkerServices:
        """The services of the calling context, as a worker rebuilds them; syncs the budget actor."""
        budget, cache, tracer = context.budget(), context.cache(), context.tracer()
        limits = context.endpoint_limits()
        actor = None
        if budget is not None or cache is not None:
            actor = self._budget_actor()
            self._ray.get(actor.reset.remote(  # the budget travels as a copy: its limits, spend and calls kept
                budget, str(cache.path) if cache is not None else None,
                str(cache.mode) if cache is not None else None))
        return WorkerServices(
            actor=actor, limits=budget.limits if budget is not None else None, cache=cache is not None,
            trace_id=tracer.trace_id if tracer is not None else None,
            parent_span=trace_mod._current_span.get(), agent=trace_mod._current_agent.get(),
            endpoint_cap=limits.default_cap if limits is not None else 8)

    def _budget_actor(self) -> Any:
        """One budget actor per executor, on the driver's node (it opens the driver's cache file)."""
        if self._actor is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = self._ray.get_runtime_context().get_node_id()
            self._actor = self._ray.remote(BudgetActor).options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)).remote()
        return self._actor

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], *, jobs: int = 4, on_done: OnDone | None = None,
            return_exceptions: bool = False, gpu: bool = False, outputs: Outputs | None = None) -> list[Any]:
        ray = self._ray
        items = list(items)
        if gpu and self.gpu_slots() < 1:
            raise UserError("these tasks need a GPU each and the Ray cluster has none (ray status lists its "
                            "resources); add a GPU node or run with --executor local on a GPU machine")
        services = self._services()
        opts = {"num_gpus": 1} if gpu else {}
        fn_ref = ray.put(fn)
        results: list[Any] = [None] * len(items)
        attempts = [0] * len(items)
        pending: dict[Any, int] = {}
        queue = list(range(len(items)))[::-1]
        first_error: BaseException | None = None
        budget, tracer = context.budget(), context.tracer()

        def submit(i: int) -> None:
            attempts[i] += 1
            ref = self._task.options(**opts).remote(fn_ref, items[i], services, outputs is not None)
            pending[ref] = i

        while queue or pending:
            while queue and len(pending) < max(1, jobs):
                submit(queue.pop())
            [ref], _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ref)
            try:
                env: _Envelope = ray.get(ref)
            except ray.exceptions.RayTaskError as e:  # the task could not run at all (e.g. fn not importable)
                env = _Envelope(error=RuntimeError(f"task could not run on the worker: {str(e)[:500]}"))
            except ray.exceptions.RayError as e:  # the worker or its node died mid-task
                if attempts[i] <= self.retries:
                    submit(i)
                    continue
                results[i] = TaskFailed(f"{type(e).__name__}: {str(e).splitlines()[0][:300]}", attempts[i])
                if on_done:
                    on_done(i, results[i])
                continue
            if env.spend and budget is not None:
                budget.add(Spend.from_dict(env.spend))
            if env.spans and tracer is not None:
                for rec in env.spans:
                    tracer.emit(rec)
            if env.files and outputs is not None:
                write_back(env.files, Path(outputs(items[i])))
            if env.error is not None:
                results[i] = env.error
                if not return_exceptions and first_error is None:
                    first_error = env.error
            else:
                results[i] = env.value
            if on_done:
                on_done(i, results[i])
        if first_error is not None:
            raise first_error
        return results

    def gpu_slots(self) -> int:
        return int(self._ray.cluster_resources().get("GPU", 0))

    def host(self, obj: Any) -> Any:
        """`obj` moved into the budget actor (on the driver's node); the caller and the tasks get a handle."""
        self._hosted += 1
        actor = self._budget_actor()
        self._ray.get(actor.host.remote(self._hosted, obj))
        return Hosted(actor, self._hosted, type(obj).__name__)

    def close(self) -> None:
        if self._actor is not None:
            self._ray.kill(self._actor)
            self._actor = None
        if self._owned:
            self._ray.shutdown()
            self._owned = False

