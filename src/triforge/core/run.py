"""One way to open a run: its directory, models, response cache, budget, tracer and isolation record.

Every run command opens its run with `open_run(...)`: the services it makes are installed in the context
for the block (so every LLM call in it is cached, budgeted and traced the same way) and closed after it,
whatever happens inside. Which earlier results a run may reuse (its resume rules) is the subsystem's to
say: each one fingerprints what fixes its results (`core.provenance`) in the directory opened here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triforge.core import context
from triforge.core.budget import Budget, BudgetLimits
from triforge.core.cache import ResponseCache, open_cache
from triforge.core.llm import LLM
from triforge.core.models import ModelPool
from triforge.core.rundir import make_run_dir
from triforge.core.trace import Tracer


@dataclass
class Run:
    out: Path
    models: ModelPool
    cache: ResponseCache | None = None
    budget: Budget | None = None
    tracer: Tracer | None = None
    isolation: dict[str, Any] = field(default_factory=dict)  # how model-written code is confined here

    @property
    def model(self) -> LLM:
        """The run's default model (`--model`)."""
        return self.models.default


@contextlib.contextmanager
def open_run(out: str | Path, *, model: str | None = None, base_url: str | None = None,
             api_key_env: str | None = None, llm: LLM | None = None, cache: str | None = None,
             cache_path: str | Path | None = None,
             limits: BudgetLimits | None = None, trace: bool = False,
             isolation: dict[str, Any] | None = None) -> Iterator[Run]:
    """Open the run in `out` (made if missing) and install its services for the block.

    `model`, `base_url`, `api_key_env`: the run's default model, as the CLI options name it; `llm`: a client
    the caller made instead (a scripted model), whose closing stays the caller's.
    `cache`: off, rw or replay (None: the config file's `cache`), in `cache_path` (default: the user's
    response cache). `limits`: the run's budget (none when every limit is None). `trace`: a tracer writing
    `out/trace.jsonl` (leave it to a subsystem that writes its own). `isolation`: the caller's isolation
    record (core knows nothing of confinement), kept on the run for its config and trace.
    """
    path = make_run_dir(out)
    budget = Budget(limits) if limits is not None and any(v is not None for v in limits.as_dict().values()) \
        else None
    with contextlib.ExitStack() as stack:
        rc = open_cache(cache, cache_path)
        if rc is not None:
            stack.callback(rc.close)
        models = ModelPool(model, base_url, api_key_env, default=llm)
        stack.callback(models.close)
        run = Run(path, models, rc, budget, Tracer(path) if trace else None, dict(isolation or {}))
        stack.enter_context(context.use(budget=budget, cache=rc, tracer=run.tracer,
                                        limits=context.endpoint_limits() or context.EndpointLimits()))
        yield run
