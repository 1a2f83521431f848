"""The real client against the fake server over loopback HTTP: every injected fault."""

from __future__ import annotations

import json

import openai
import pytest

from triforge.core import context
from triforge.core.budget import Budget, BudgetLimits
from triforge.core.config import ModelConfig
from triforge.core.errors import BudgetExceeded, EndpointError
from triforge.core.llm import OpenAICompatLLM
from triforge.testing.fake_server import FakeOpenAIServer

HELLO = [{"role": "user", "content": "hello"}]


class Sleeps(list):
    def __call__(self, s: float) -> None:
        self.append(s)


def make(srv: FakeOpenAIServer, **kw) -> tuple[OpenAICompatLLM, Sleeps]:
    sleeps = Sleeps()
    cfg = ModelConfig(model="fake-model", base_url=srv.base_url, **{"timeout_s": 5, "max_retries": 3, **kw})
    return OpenAICompatLLM("fake", cfg, sleep=sleeps), sleeps


def test_plain_reply_and_usage():
    with FakeOpenAIServer([{"content": "hi there", "usage": {"input_tokens": 7, "output_tokens": 3}}]) as srv:
        llm, _ = make(srv, price_in_per_mtok=1.0, price_out_per_mtok=2.0)
        comp = llm.complete(HELLO)
    assert comp.content == "hi there"
    assert (comp.usage.input_tokens, comp.usage.output_tokens) == (7, 3)
    assert comp.cost_usd == pytest.approx((7 * 1.0 + 3 * 2.0) / 1e6)
    assert srv.requests[0]["messages"] == HELLO


def test_429_honours_retry_after():
    with FakeOpenAIServer([{"fault": "429", "retry_after": 2}, "ok"]) as srv:
        llm, sleeps = make(srv)
        assert llm.complete(HELLO).content == "ok"
    assert sleeps == [2.0]


@pytest.mark.parametrize("fault", ["500", "truncated", "empty_choices", "503"])
def test_transient_faults_are_retried(fault):
    with FakeOpenAIServer([{"fault": fault}, {"fault": fault}, "ok"]) as srv:
        llm, sleeps = make(srv)
        assert llm.complete(HELLO).content == "ok"
    assert len(sleeps) == 2 and len(srv.requests) == 3


def test_retries_exhausted_is_endpoint_error():
    with FakeOpenAIServer([{"fault": "500"}] * 3) as srv:
        llm, _ = make(srv, max_retries=2)
        with pytest.raises(EndpointError, match="gave up after 3 attempts"):
            llm.complete(HELLO)


def test_slow_reply_past_timeout():
    with FakeOpenAIServer([{"fault": "slow", "delay_s": 2.0}]) as srv:
        llm, _ = make(srv, timeout_s=0.3, max_retries=0)
        with pytest.raises(EndpointError, match="no reply within 0.3 s"):
            llm.complete(HELLO)


def test_auth_failure_is_not_retried(monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-test-secret-value-123")
    with FakeOpenAIServer([{"fault": "401"}, "never"]) as srv:
        llm, sleeps = make(srv, api_key_env="FAKE_KEY")
        with pytest.raises(EndpointError, match="rejected the API key"):
            llm.complete(HELLO)
    assert sleeps == [] and len(srv.requests) == 1


def test_missing_key_env_is_clear():
    with FakeOpenAIServer([]) as srv, pytest.raises(EndpointError, match=r"\$NOT_SET_KEY, which is not set"):
        make(srv, api_key_env="NOT_SET_KEY")


def test_unreachable_endpoint():
    cfg = ModelConfig(model="m", base_url="http://127.0.0.1:9/v1", max_retries=1, timeout_s=2)
    llm = OpenAICompatLLM("down", cfg, sleep=lambda s: None)
    with pytest.raises(EndpointError, match="unreachable"):
        llm.complete(HELLO)


def test_null_content_is_sent_as_empty_string():
    """llama.cpp rejects assistant messages whose content is null."""
    msgs = [*HELLO, {"role": "assistant", "content": None,
                     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "done"}]
    with FakeOpenAIServer(["ok"], reject_null_content=True) as srv:
        llm, _ = make(srv)
        assert llm.complete(msgs).content == "ok"
    assert srv.requests[0]["messages"][1]["content"] == ""


def test_native_tool_calls_parsed():
    step = {"tool_calls": [{"id": "abc", "name": "add", "arguments": {"a": 1, "b": 2}}]}
    with FakeOpenAIServer([step]) as srv:
        llm, _ = make(srv)
        comp = llm.complete(HELLO, tools=[{"type": "function", "function": {"name": "add", "parameters": {}}}])
    assert comp.tool_calls[0].name == "add" and json.loads(comp.tool_calls[0].arguments) == {"a": 1, "b": 2}
    assert srv.requests[0]["tools"][0]["function"]["name"] == "add"


def test_streaming_and_models_endpoint():
    with FakeOpenAIServer(["a streamed reply that is longer than one chunk"]) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        text = "".join(ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
            model="fake-model", messages=HELLO, stream=True) if ch.choices)
        models = [m.id for m in client.models.list()]
    assert text == "a streamed reply that is longer than one chunk"
    assert models == ["fake-model"]


def test_script_exhausted_is_an_error():
    with FakeOpenAIServer([]) as srv:
        llm, _ = make(srv)
        with pytest.raises(EndpointError, match="HTTP 400"):
            llm.complete(HELLO)
    assert srv.errors == ["script exhausted"]


def test_request_log(tmp_path):
    log = tmp_path / "req.jsonl"
    with FakeOpenAIServer(["a", "b"], log_path=log) as srv:
        llm, _ = make(srv)
        llm.complete(HELLO)
        llm.complete(HELLO)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == 2 and lines[0]["body"]["model"] == "fake-model"


def test_budget_checked_before_call():
    with FakeOpenAIServer(["a", "b"]) as srv:
        llm, _ = make(srv)
        with context.use(budget=Budget(BudgetLimits(max_calls=1))):
            llm.complete(HELLO)
            with pytest.raises(BudgetExceeded, match="calls"):
                llm.complete(HELLO)
    assert len(srv.requests) == 1
