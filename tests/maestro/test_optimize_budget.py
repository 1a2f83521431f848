"""The ledger never lets a cap be overshot: rollouts reserved all-or-nothing, calls reserved before sending."""

from __future__ import annotations

import random
import threading

import pytest

from triforge.core.errors import BudgetExceeded
from triforge.core.llm import Completion, Usage
from triforge.maestro.optimize.ledger import Ledger, LedgerLLM
from triforge.maestro.optimize.runner import Task, optimize
from triforge.maestro.optimize.state import OptimizeSettings
from triforge.maestro.sim_bed import TOOLS, VALIDATORS, SimLM, sim_tasks
from triforge.testing.scripted import ScriptedLLM
from triforge.testing.sim_reflection import SimReflection


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
    led = Ledger(max_rollouts=10)
    led.reserve_rollouts(6, "train")
    with pytest.raises(BudgetExceeded):
        led.reserve_rollouts(5, "val")
    assert led.spent().search_rollouts == 6
    led.reserve_rollouts(4, "val")
    led.reserve_rollouts(50, "test")  # the final test evaluation is counted, not capped
    s = led.spent()
    assert (s.search_rollouts, s.rollouts["test"]) == (10, 50)


def test_call_cap_is_never_overshot_under_threads():
    led = Ledger(max_calls=100)
    inner = CountingLLM()
    llm = LedgerLLM(inner, led, "task")
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
    assert inner.sent == 100 and led.spent().total_calls == 100 and len(refused) == 220


def test_a_cached_reply_is_counted_and_priced_like_a_sent_one():
    led = Ledger()
    LedgerLLM(CountingLLM(cached=True), led, "reflection").complete([])
    LedgerLLM(CountingLLM(cached=False), led, "task").complete([])
    s = led.spent()
    assert s.calls == {"task": 1, "reflection": 1} and s.sent == 1
    assert s.usd == pytest.approx(2 * (3 * 1 + 2 * 2))  # priced from the usage both times


@pytest.mark.parametrize("trial", range(6))
def test_random_caps_on_the_bed_are_never_overshot(trial):
    rng = random.Random(trial)
    t = sim_tasks()[trial % 6]
    budget, calls = rng.randint(12, 120), rng.choice([None, rng.randint(5, 300)])
    task = Task("sim", t.program, t.split("train"), t.split("val"), [], t.metric, t.retrievers())
    settings = OptimizeSettings(budget=budget, max_calls=calls, tools=TOOLS, validators=VALIDATORS, seed=trial,
                                patience=30)
    try:
        s = optimize("maestro", task, SimLM(), SimReflection(), settings, None, jobs=2)
    except Exception as e:  # caps too small for the seed's validation are refused up front, as user errors
        assert "raise --budget" in str(e) or "fit the caps" in str(e)
        return
    assert s["spent"]["search_rollouts"] <= budget
    if calls is not None:
        assert s["search_calls"] <= calls
