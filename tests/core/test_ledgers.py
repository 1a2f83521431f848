"""Budget ledger, response cache, parallel map."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triforge.core import context
from triforge.core.budget import Budget, BudgetLimits
from triforge.core.cache import CacheMiss, ResponseCache, request_key
from triforge.core.config import ModelConfig
from triforge.core.errors import BudgetExceeded
from triforge.core.llm import OpenAICompatLLM
from triforge.executors.parallel import pmap
from triforge.testing.fake_server import FakeOpenAIServer


def test_budget_is_thread_safe_and_exact():
    b = Budget()
    threads = [threading.Thread(target=lambda: [b.charge(input_tokens=3, output_tokens=2, usd=0.5)
                                                for _ in range(1000)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = b.spent()
    assert (s.calls, s.input_tokens, s.output_tokens, s.usd) == (8000, 24000, 16000, 4000.0)


@pytest.mark.parametrize(
    ("limits", "charge", "what"),
    [
        (BudgetLimits(max_calls=2), {"calls": 2}, "calls"),
        (BudgetLimits(max_input_tokens=10), {"input_tokens": 10}, "input tokens"),
        (BudgetLimits(max_output_tokens=10), {"output_tokens": 11}, "output tokens"),
        (BudgetLimits(max_usd=1.0), {"usd": 1.5}, "USD"),
    ],
)
def test_budget_limits(limits, charge, what):
    b = Budget(limits)
    b.check()
    b.charge(**{"calls": 0, **charge})
    with pytest.raises(BudgetExceeded, match=what):
        b.check()


def test_budget_wall_time():
    b = Budget(BudgetLimits(max_wall_s=0.05))
    b.check()
    time.sleep(0.06)
    with pytest.raises(BudgetExceeded, match="wall seconds"):
        b.check()


def test_cache_modes(tmp_path):
    req = {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.7}
    c = ResponseCache(tmp_path / "c.sqlite", "rw")
    assert c.get(req, 0) is None
    c.put(req, {"content": "s0"}, 0)
    c.put(req, {"content": "s1"}, 1)
    assert c.get(req, 0) == {"content": "s0"} and c.get(req, 1) == {"content": "s1"}
    c.close()
    replay = ResponseCache(tmp_path / "c.sqlite", "replay")
    assert replay.get(req, 1) == {"content": "s1"}
    with pytest.raises(CacheMiss, match="sample 2"):
        replay.get(req, 2)
    assert ResponseCache(tmp_path / "x.sqlite", "off").get(req) is None


requests = st.dictionaries(st.sampled_from(["model", "temperature", "messages", "tools", "max_tokens"]),
                           st.text(max_size=5) | st.integers() | st.lists(st.text(max_size=3), max_size=3),
                           min_size=1)


@settings(max_examples=200, deadline=None)
@given(req=requests, sample=st.integers(0, 50))
def test_cache_key_properties(req, sample):
    reordered = dict(reversed(list(req.items())))
    assert request_key(req, sample) == request_key(reordered, sample)
    assert request_key(req, sample) != request_key(req, sample + 1)
    assert request_key(req, sample) == request_key({**req, "absent": None}, sample)


def test_cached_client_replays_without_the_server(tmp_path):
    with FakeOpenAIServer(["first", "second"]) as srv:
        llm = OpenAICompatLLM("f", ModelConfig(model="fake-model", base_url=srv.base_url))
        msgs = [{"role": "user", "content": "q"}]
        with context.use(cache=ResponseCache(tmp_path / "c.sqlite", "rw")):
            a0, a1 = llm.complete(msgs, sample=0).content, llm.complete(msgs, sample=1).content
        with context.use(cache=ResponseCache(tmp_path / "c.sqlite", "replay")):
            b0 = llm.complete(msgs, sample=0)
    assert (a0, a1) == ("first", "second") and b0.content == "first" and b0.cached
    assert len(srv.requests) == 2


def test_pmap_carries_context_and_caps_endpoint():
    in_flight, peak, lock = [0], [0], threading.Lock()

    def reply(body):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return "ok"

    with FakeOpenAIServer(reply) as srv:
        llm = OpenAICompatLLM("f", ModelConfig(model="fake-model", base_url=srv.base_url, max_concurrency=3))
        budget = Budget()
        with context.use(budget=budget, limits=context.EndpointLimits()):
            out = pmap(lambda i: llm.complete([{"role": "user", "content": str(i)}]).content, range(12), jobs=8)
    assert out == ["ok"] * 12
    assert budget.spent().calls == 12  # the budget reached every worker thread
    assert peak[0] == 3


def test_pmap_errors():
    def f(i):
        if i == 2:
            raise ValueError("bad item")
        return i

    with pytest.raises(ValueError, match="bad item"):
        pmap(f, range(5), jobs=2)
    out = pmap(f, range(5), jobs=2, return_exceptions=True)
    assert out[:2] == [0, 1] and isinstance(out[2], ValueError)


@pytest.mark.parametrize("change", [
    {"extra_body": {"top_k": 1}}, {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}},
    {"temperature": 0.3}, {"max_tokens": 7}, {"model": "other-model"}, {"json_mode": True},
])
def test_every_reply_changing_setting_is_in_the_cache_key(tmp_path, change):
    """A model configured differently must never be served another configuration's cached reply."""
    with FakeOpenAIServer(["first", "second"]) as srv:
        base = ModelConfig(model="fake-model", base_url=srv.base_url)
        msgs = [{"role": "user", "content": "q"}]
        with context.use(cache=ResponseCache(tmp_path / "c.sqlite", "rw")):
            a = OpenAICompatLLM("a", base).complete(msgs, json_mode=True)
            b = OpenAICompatLLM("b", base.model_copy(update=change)).complete(msgs, json_mode=True)
            again = OpenAICompatLLM("a2", base).complete(msgs, json_mode=True)
    assert (a.content, b.content) == ("first", "second") and not b.cached
    assert again.cached and again.content == "first" and len(srv.requests) == 2
    if "extra_body" in change:  # the server saw the extra fields: the key is what went over the wire
        assert all(srv.requests[1].get(k) == v for k, v in change["extra_body"].items())
