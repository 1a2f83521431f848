"""maestro's search: config steps and graph steps in alternation, under one ledger, until a stop condition.

Stops: the rollout budget or the call cap (a reservation refused before anything is spent), the wall
clock, `patience` proposals without a better best, a stop file, a perfect validation score, or
`max_proposals` (a backstop for searches whose every proposal is answered from results already run). `config-only` is the same search with
the graph step off.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from triforge.core.budget import Budget
from triforge.core.errors import BudgetExceeded, EndpointError, UserError
from triforge.maestro.benchmarks.base import Example
from triforge.maestro.optimize.budget import BudgetedLLM
from triforge.maestro.optimize.config_step import config_step
from triforge.maestro.optimize.graph_step import graph_step
from triforge.maestro.optimize.pareto import Pool
from triforge.maestro.optimize.proposals import Proposal, RunLog
from triforge.maestro.optimize.rollouts import EndpointDown, Rollouts
from triforge.maestro.optimize.state import ProgramOptimizeSettings, SearchState
from triforge.maestro.program import Program


@dataclass
class SearchOutcome:
    best: Program
    best_val: float
    pool: Pool | None
    log: RunLog
    stop_reason: str
    extra: dict[str, Any] = field(default_factory=dict)


def _stop_reason(st: SearchState, started: float, since_improve: int) -> str | None:
    s = st.settings
    if s.stop_file is not None and s.stop_file.exists():
        return f"stop file {s.stop_file}"
    if s.max_wall_s is not None and time.monotonic() - started >= s.max_wall_s:
        return f"time: {s.max_wall_s:g} s"
    if s.patience is not None and since_improve >= s.patience:
        return f"patience: {since_improve} proposals without a better best"
    if st.pool.best().score >= 1.0:
        return "perfect validation score"
    if st.proposals >= s.max_proposals:
        return f"max proposals: {s.max_proposals}"
    left = st.ledger.left("rollouts")
    if left is not None and left < min(s.minibatch, len(st.train)):
        return f"rollout budget: {left} left, fewer than one minibatch"
    return None


def search(program: Program, train: list[Example], val: list[Example], rollouts: Rollouts, ledger: Budget,
           reflection: BudgetedLLM, settings: ProgramOptimizeSettings, log: RunLog,
           on_proposal: Callable[[Proposal, SearchState], None] | None = None) -> SearchOutcome:
    if not train or not val:
        raise UserError(f"the search needs train and validation examples (have {len(train)} and {len(val)})")
    if settings.budget is not None and settings.budget < len(val) + settings.minibatch:
        raise UserError(f"--max-rollouts {settings.budget} cannot cover the seed's validation ({len(val)} rollouts) and "
                        f"one minibatch ({settings.minibatch}); raise it")
    st = SearchState(settings, program, train, val, rollouts, ledger, reflection, log)
    started = time.monotonic()
    since_improve, n_config = 0, 0
    try:
        st.add_candidate(program, [], "seed")
    except BudgetExceeded as e:
        raise UserError(f"the seed program's validation does not fit the caps ({e}); raise --max-rollouts or "
                        "--max-calls") from None
    log.point(ledger.spent().rollouts, st.pool.best().score)
    stop: str | None = None
    while stop is None:
        stop = _stop_reason(st, started, since_improve)
        if stop is not None:
            break
        st.current = None
        try:
            if settings.graph_step and st.proposals % (settings.config_per_graph + 1) == settings.config_per_graph:
                prop: Proposal | None = graph_step(st)
            else:
                prop = config_step(st, n_config)
                n_config += 1
                if prop is None and settings.graph_step:  # no module with a text to rewrite: edit the graph
                    prop = graph_step(st)
        except BudgetExceeded as e:
            stop, prop = str(e), st.current
            if prop is not None:
                prop.verdict = f"stopped: {e}"
        except EndpointError as e:  # the reflection endpoint (the task's is caught in Rollouts)
            if isinstance(e, EndpointDown):
                raise
            raise EndpointDown(f"{e}; re-run the same command to resume from the response cache") from e
        if prop is None:
            stop = stop or "nothing to propose: no module has a text to rewrite and the graph step is off"
            break
        sp = ledger.spent()
        prop.spent = {"search_rollouts": sp.rollouts, "train_rollouts": sp.kind("rollouts.train"),
                      "calls": sp.calls}
        log.add(prop)
        st.proposals += 1
        if prop.child_id is not None:
            log.point(sp.rollouts, st.pool.best().score)
        since_improve = 0 if prop.improved else since_improve + 1
        if on_proposal is not None:
            on_proposal(prop, st)
    best = st.pool.best()
    return SearchOutcome(best.program, best.score, st.pool, log, stop)
