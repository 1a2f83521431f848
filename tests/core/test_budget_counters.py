"""The one ledger's named counters: rollouts and evaluations in batches, calls kept back, places held for
callers elsewhere, usage beyond tokens, and a copy that travels (pickled) with what it has spent."""

from __future__ import annotations

import pickle
import threading

import pytest

from triforge.core.budget import Budget, BudgetLimits, Spend
from triforge.core.errors import BudgetExceeded


def test_batches_are_all_or_none_and_uncapped_kinds_are_only_tallied():
    b = Budget(BudgetLimits(max_rollouts=10))
    b.reserve("rollouts", 7, kind="train")
    with pytest.raises(BudgetExceeded, match="7 of 10 used, 4 more needed"):
        b.reserve("rollouts", 4, kind="val")
    b.reserve("rollouts", 3, kind="val")
    b.reserve("rollouts", 99, kind="test", capped=False)
    s = b.spent()
    assert (s.rollouts, s.kind("rollouts.train"), s.kind("rollouts.val"), s.kind("rollouts.test")) == (10, 7, 3, 99)
    assert b.left("rollouts") == 0 and b.left("evaluations") is None
    with pytest.raises(ValueError):
        b.reserve("calls", 1)


def test_grant_cuts_a_batch_to_what_is_left_keeping_a_reserve():
    b = Budget(BudgetLimits(max_evaluations=5))
    assert b.grant("evaluations", 4, keep=2) == 3
    assert b.grant("evaluations", 4, keep=2) == 0  # the 2 kept are for later
    assert b.grant("evaluations", 4) == 2 and b.spent().evaluations == 5
    assert Budget().grant("evaluations", 4) == 4  # no cap: all granted, all counted


def test_calls_kept_back_refuse_the_search_and_are_given_back_for_what_follows():
    b = Budget(BudgetLimits(max_calls=5))
    b.keep("calls", 3, "the final test evaluation")
    b.reserve_call("task")
    b.reserve_call("task")
    with pytest.raises(BudgetExceeded, match="3 kept for the final test evaluation"):
        b.reserve_call("reflection")
    b.keep("calls", 0)
    for _ in range(3):
        b.reserve_call("task")
    with pytest.raises(BudgetExceeded, match="5 calls of 5"):
        b.check()
    assert b.spent().kind("calls.task") == 5 and b.spent().kind("calls.reflection") == 0


def test_places_held_for_callers_elsewhere_count_against_the_cap_until_charged_or_released():
    b = Budget(BudgetLimits(max_calls=2))
    assert b.take_place() is None and b.take_place() is None
    assert "2 calls of 2" in (b.take_place() or "")
    with pytest.raises(BudgetExceeded):
        b.check()  # this thread's call would pass the cap with the two in flight
    b.release_place()
    b.charge(place=True, input_tokens=4)
    assert b.spent().calls == 1
    b.check()  # one place left: this thread's
    assert b.take_place() is not None


def test_threads_counting_calls_at_once_never_pass_the_cap():
    b = Budget(BudgetLimits(max_calls=50))
    made = []

    def worker():
        for _ in range(30):
            try:
                b.reserve_call("task")
                made.append(1)
            except BudgetExceeded:
                pass

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 50 == b.spent().calls


def test_usage_beyond_tokens_and_tallies_are_kept_never_capped():
    b = Budget(BudgetLimits(max_output_tokens=100))
    b.check()
    b.charge(input_tokens=10, output_tokens=40, reasoning_tokens=30, cached_tokens=6, tally="sent")
    b.charge(calls=0, output_tokens=5, reasoning_tokens=2)
    s = b.spent()
    assert s.extra == {"reasoning_tokens": 32, "cached_tokens": 6} and s.kind("sent") == 1
    assert b.output_cap(None) == 55 and b.output_cap(20) == 20
    b.charge(output_tokens=60)
    assert b.output_cap(20) == 1 and "output tokens" in (b.exceeded() or "")


def test_a_copy_keeps_its_limits_spend_wall_time_and_calls_kept():
    b = Budget(BudgetLimits(max_calls=9, max_wall_s=1000))
    b.reserve("evaluations", 2)
    b.charge(input_tokens=3, reasoning_tokens=1)
    b.keep("calls", 4, "later")
    c = pickle.loads(pickle.dumps(b))
    assert c.limits == b.limits and c.spent().evaluations == 2 and c.spent().extra == {"reasoning_tokens": 1}
    assert c.spent().wall_s >= b.spent().wall_s - 0.01
    for _ in range(4):
        c.reserve_call()
    with pytest.raises(BudgetExceeded, match="4 kept for later"):
        c.reserve_call()
    c.add(Spend(calls=2, usd=0.5, kinds={"sent": 2}))
    assert c.spent().calls == 7 and c.spent().kind("sent") == 2


def test_a_stored_spend_is_restored_and_unknown_keys_are_left_out():
    b = Budget(BudgetLimits(max_calls=3), {"calls": 3, "usd": 1.5, "evaluations": 4, "something_new": 1})
    assert b.spent().evaluations == 4 and b.spent().usd == 1.5
    with pytest.raises(BudgetExceeded, match="3 calls of 3"):
        b.check()


def test_the_client_records_reasoning_and_cached_tokens_in_the_budget():
    from triforge.core import context
    from triforge.core.config import ModelConfig
    from triforge.core.llm import OpenAICompatLLM
    from triforge.testing.fake_server import FakeOpenAIServer

    step = {"content": "ok", "usage": {"input_tokens": 50, "output_tokens": 20, "reasoning_tokens": 12,
                                        "cached_tokens": 30}}
    with FakeOpenAIServer([step, {"content": "plain", "usage": {"input_tokens": 5, "output_tokens": 3}}]) as srv:
        llm = OpenAICompatLLM("f", ModelConfig(model="m", base_url=srv.base_url, max_retries=0))
        b = Budget()
        with context.use(budget=b):
            llm.complete([{"role": "user", "content": "think"}])
            llm.complete([{"role": "user", "content": "again"}])
    s = b.spent()
    assert (s.calls, s.input_tokens, s.output_tokens) == (2, 55, 23)  # parts of the totals, not added again
    assert s.extra == {"reasoning_tokens": 12, "cached_input_tokens": 30}
