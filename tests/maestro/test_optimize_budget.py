"""The search budget never lets a cap be overshot: rollouts reserved all-or-nothing, calls reserved before sending."""

from __future__ import annotations

import random
import threading

import pytest

from triforge.core.errors import BudgetExceeded
from triforge.core.llm import Completion, Usage
from triforge.maestro.optimize.budget import BudgetedLLM, reserve_rollouts, search_budget, spend_summary
from triforge.maestro.optimize.runner import Task, optimize
from triforge.maestro.optimize.state import ProgramOptimizeSettings
from triforge.maestro.sim_bed import TOOLS, VALIDATORS, SimLM, sim_tasks
from triforge.maestro.sim_reflection import SimReflection
from triforge.testing.scripted import ScriptedLLM


class CountingLLM:
    def __init__(self, cached: bool = False) -> None:
        self.alias, self.config = "c", ScriptedLLM([], price_in_per_mtok=1e6, price_out_per_mtok=2e6).config
        self.sent = 0
        self.cached = cached
        self._lock = threading.Lock()

    def complete(self, messages, **kw):
        with self._lock:
            self.sent += 1
        return Completion("ok", usage=Usage(3, 2), cached=self.cached)


def test_rollouts_are_reserved_all_or_nothing():
    led = search_budget(max_rollouts=10)
    reserve_rollouts(led, 6, "train")
    with pytest.raises(BudgetExceeded):
        reserve_rollouts(led, 5, "val")
    assert led.spent().rollouts == 6
    reserve_rollouts(led, 4, "val")
    reserve_rollouts(led, 50, "test")  # the final test evaluation is counted apart from the rollout cap
    s = spend_summary(led.spent())
    assert (s["search_rollouts"], s["rollouts"]) == (10, {"train": 6, "val": 4, "test": 50})
    with pytest.raises(ValueError):
        reserve_rollouts(led, 1, "other")


def test_call_cap_is_never_overshot_under_threads():
    led = search_budget(max_calls=100)
    inner = CountingLLM()
    llm = BudgetedLLM(inner, led, "task")
    refused = []

    def worker():
        for _ in range(40):
            try:
                llm.complete([{"role": "user", "content": "x"}])
            except BudgetExceeded:
                refused.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert inner.sent == 100 and led.spent().calls == 100 and len(refused) == 220


def test_a_cached_reply_is_counted_and_priced_like_a_sent_one():
    led = search_budget()
    BudgetedLLM(CountingLLM(cached=True), led, "reflection").complete([])
    BudgetedLLM(CountingLLM(cached=False), led, "task").complete([])
    s = spend_summary(led.spent())
    assert s["calls"] == {"task": 1, "reflection": 1} and s["sent"] == 1
    assert s["usd"] == pytest.approx(2 * (3 * 1 + 2 * 2))  # priced from the usage both times


@pytest.mark.parametrize("trial", range(6))
def test_random_caps_on_the_bed_are_never_overshot(trial):
    rng = random.Random(trial)
    t = sim_tasks()[trial % 6]
    budget, calls = rng.randint(12, 120), rng.choice([None, rng.randint(5, 300)])
    task = Task("sim", t.program, t.split("train"), t.split("val"), [], t.metric, t.retrievers())
    settings = ProgramOptimizeSettings(budget=budget, max_calls=calls, tools=TOOLS, validators=VALIDATORS, seed=trial,
                                patience=30)
    try:
        s = optimize("maestro", task, SimLM(), SimReflection(), settings, None, jobs=2)
    except Exception as e:  # caps too small for the seed's validation are refused up front, as user errors
        assert "raise --max-rollouts" in str(e) or "fit the caps" in str(e)
        return
    assert s["spent"]["search_rollouts"] <= budget
    if calls is not None:
        assert s["search_calls"] <= calls
