"""The local pool's call cap: every call reserves a place before it goes out, so threads in flight together
never pass the cap; places a task checked for and never charged are given back."""

from __future__ import annotations

import threading
import time

import pytest

from triforge.core import context
from triforge.core.budget import Budget, BudgetLimits
from triforge.core.config import ModelConfig
from triforge.core.errors import BudgetExceeded
from triforge.core.llm import OpenAICompatLLM
from triforge.executors.local import LocalPool
from triforge.testing.fake_server import FakeOpenAIServer


def _hammer(budget: Budget, made: list[int], lock: threading.Lock) -> int:
    """Calls until refused; each holds its place a moment, as a request in flight does."""
    n = 0
    while True:
        try:
            budget.check()
        except BudgetExceeded:
            return n
        time.sleep(0.002)
        with lock:
            made.append(1)
        budget.charge(input_tokens=1)
        n += 1


@pytest.mark.parametrize(("threads", "cap"), [(8, 5), (16, 37), (4, 1)])
def test_threads_hammering_a_call_cap_never_pass_it(threads, cap):
    budget = Budget(BudgetLimits(max_calls=cap))
    made: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(threads, timeout=30)

    def task(_: int) -> int:
        start.wait()  # all threads check at once
        return _hammer(budget, made, lock)

    with context.use(budget=budget):
        per_task = LocalPool().map(task, range(threads), jobs=threads)
    assert len(made) == cap and sum(per_task) == cap and budget.spent().calls == cap


def test_the_client_sends_no_call_past_the_cap_from_many_threads():
    gate = threading.Barrier(4, timeout=30)

    def reply(body):
        if body["messages"][-1]["content"].endswith("call 0"):
            gate.wait()  # the first call of every task is in flight at once
        return {"content": "ok", "delay_s": 0.02}

    with FakeOpenAIServer(reply) as srv:
        llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url, max_retries=0,
                                                  timeout_s=20))

        def calls_until_refused(tag: int) -> int:
            n = 0
            try:
                while True:
                    llm.complete([{"role": "user", "content": f"task {tag} call {n}"}])
                    n += 1
            except BudgetExceeded:
                return n

        budget = Budget(BudgetLimits(max_calls=6))
        with context.use(budget=budget, limits=context.EndpointLimits(default_cap=8)):
            made = LocalPool().map(calls_until_refused, range(4), jobs=4)
        assert len(srv.requests) == 6 and sum(made) == 6 and budget.spent().calls == 6


def test_a_place_checked_for_and_never_charged_is_given_back():
    budget = Budget(BudgetLimits(max_calls=3))

    def check_only(_: int) -> None:
        budget.check()  # e.g. "is there budget left?" before work that then made no call

    with context.use(budget=budget):
        LocalPool().map(check_only, range(6), jobs=3)
        LocalPool().map(check_only, range(6), jobs=1)  # in the caller's thread
    for _ in range(3):  # the whole cap is still there, in this thread and in a new one
        budget.check()
        budget.charge()
    with pytest.raises(BudgetExceeded, match="3 calls of 3"):
        budget.check()

    other = Budget(BudgetLimits(max_calls=1))
    t = threading.Thread(target=other.check)  # a thread that ends holding a place
    t.start()
    t.join()
    other.check()  # its place went with it


def test_a_finished_task_does_not_keep_its_place_while_its_pool_thread_idles():
    budget = Budget(BudgetLimits(max_calls=2))
    checked = threading.Event()
    both = threading.Barrier(2, timeout=10)  # two pool threads, not one reused

    def task(kind: str) -> int:
        both.wait()
        if kind == "check-only":
            budget.check()  # its thread then idles in the pool until the map ends
            checked.set()
            return 0
        checked.wait(10)
        time.sleep(0.05)
        return _hammer(budget, [], threading.Lock())

    with context.use(budget=budget):
        got = LocalPool().map(task, ["check-only", "caller"], jobs=2)
    assert got == [0, 2]
