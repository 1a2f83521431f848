"""The real client against the fake server in each strict family: refused parameters are learned once and
never reach the user, thinking is kept apart, reasoning and cached tokens are counted and priced, Azure is
addressed as Azure."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from triforge.core import context
from triforge.core.budget import Budget
from triforge.core.capabilities import Learned
from triforge.core.config import ModelConfig
from triforge.core.errors import EndpointError, Submitted
from triforge.core.llm import OpenAICompatLLM
from triforge.core.react import Agent, AgentConfig
from triforge.core.tools import ToolSet, tool
from triforge.core.trace import Tracer, read_spans
from triforge.testing.fake_server import FakeOpenAIServer
from triforge.testing.strict_families import DECOY_THINKING, refusal
from triforge.ui.trace_view import render_html, summarize

HELLO = [{"role": "user", "content": "hi"}]
RAN: list[str] = []


@tool
def submit(answer: str) -> str:
    """Submit the answer.

    Args:
        answer: the answer
    """
    RAN.append(answer)
    raise Submitted(answer)


@tool
def python_exec(code: str) -> str:
    """Run Python code.

    Args:
        code: the code
    """
    RAN.append(f"python:{code}")
    return "ran"


def client(srv: FakeOpenAIServer, **cfg) -> OpenAICompatLLM:
    settings = {"model": "m", "base_url": srv.base_url, "max_retries": 0, "timeout_s": 10, **cfg}
    return OpenAICompatLLM("alias", ModelConfig(**settings), learned=Learned())


def announcements(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]


def test_refused_parameters_are_learned_once_said_once_and_not_sent_again(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="triforge.llm")
    tracer = Tracer(tmp_path)
    with FakeOpenAIServer(lambda body: "ok", strict="openai-reasoning") as srv, context.use(tracer=tracer):
        llm = client(srv)
        first = llm.complete(HELLO, temperature=0.0, max_tokens=32, stop=["<tool_response"])
        again = [llm.complete(HELLO, temperature=t, max_tokens=32, stop=["x"]) for t in (0.8, 0.0)]
    assert first.content == "ok" and all(c.content == "ok" for c in again)
    assert [r["error"]["param"] for r in srv.refused] == ["max_tokens", "temperature", "stop"]
    assert all(set(b) == {"model", "messages", "max_completion_tokens"} for b in srv.requests)
    assert [b["max_completion_tokens"] for b in srv.requests] == [32, 32, 32]
    said = announcements(caplog)
    assert len(said) == 3 and "token_limit_param = \"max_completion_tokens\"" in said[0]
    events = [s for s in read_spans(tmp_path) if s["name"] == "llm.param_refused"]
    assert [e["attributes"]["triforge.refused_param"] for e in events] == ["max_tokens", "temperature", "stop"]
    llm_spans = [s for s in read_spans(tmp_path) if s["kind"] == "llm"]
    assert llm_spans[-1]["attributes"]["triforge.adapted_params"]["stop"] == "drop"
    assert llm_spans[0]["attributes"]["gen_ai.request.max_tokens"] == 32


def test_threads_hitting_a_strict_server_at_once_learn_it_once(caplog):
    caplog.set_level(logging.WARNING, logger="triforge.llm")
    errors: list[Exception] = []
    with FakeOpenAIServer(lambda body: "ok", strict="openai-reasoning") as srv:
        llm = client(srv)

        def ask() -> None:
            try:
                llm.complete(HELLO, temperature=0.0, max_tokens=8, stop=["x"])
            except Exception as e:  # noqa: BLE001 - collected for the assertion
                errors.append(e)

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        refused_before = len(srv.refused)
        llm.complete(HELLO, temperature=0.0, max_tokens=8, stop=["x"])
    assert errors == [] and len(srv.requests) == 9
    assert len(announcements(caplog)) == 3 and len(srv.refused) == refused_before <= 24


def test_a_server_that_keeps_refusing_is_an_error_after_one_retry_never_a_loop(monkeypatch):
    import triforge.testing.fake_server as fake_server

    # a server that refuses temperature whatever is sent (even after the client dropped it)
    monkeypatch.setattr(fake_server, "strict_refusal", lambda families, body: refusal(
        "Unsupported value: 'temperature' does not support 0 with this model.", "temperature", "unsupported_value"))
    with FakeOpenAIServer(["never"]) as srv:
        llm = client(srv)
        with pytest.raises(EndpointError, match="HTTP 400.*temperature"):
            llm.complete(HELLO, temperature=0.0)
    assert len(srv.refused) == 2 and srv.requests == [] and srv.remaining == 1  # one retry, no loop
    assert llm.refused() == {"temperature": "drop"}


def test_a_declared_alias_sends_nothing_refused_and_its_usage_is_counted_once_and_priced(tmp_path):
    budget = Budget()
    cfg = {"token_limit_param": "max_completion_tokens", "supports_temperature": False, "supports_stop": False,
           "reasoning_effort": "low", "price_in_per_mtok": 1.0, "price_out_per_mtok": 10.0,
           "price_cached_in_per_mtok": 0.1}
    step = {"content": "ok", "usage": {"input_tokens": 1000, "output_tokens": 300, "reasoning_tokens": 200,
                                       "cached_tokens": 600}}
    with FakeOpenAIServer([step], strict="openai-reasoning") as srv, \
            context.use(budget=budget, tracer=Tracer(tmp_path)):
        comp = client(srv, **cfg).complete(HELLO, temperature=0.0, max_tokens=500, stop=["x"])
    assert srv.refused == [] and srv.requests[0]["reasoning_effort"] == "low"
    u = comp.usage
    assert (u.input_tokens, u.output_tokens, u.reasoning_tokens, u.cached_input_tokens) == (1000, 300, 200, 600)
    assert comp.cost_usd == pytest.approx((400 * 1.0 + 600 * 0.1 + 300 * 10.0) / 1e6)
    spent = budget.spent()
    assert (spent.input_tokens, spent.output_tokens) == (1000, 300)  # reasoning inside output, not added again
    [span] = [s for s in read_spans(tmp_path) if s["kind"] == "llm"]
    a = span["attributes"]
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (1000, 300)
    assert (a["gen_ai.usage.reasoning.output_tokens"], a["gen_ai.usage.cache_read.input_tokens"]) == (200, 600)
    assert a["gen_ai.request.reasoning_effort"] == "low"
    row = summarize(tmp_path)["model"]["alias"]
    assert (row.reasoning_tokens, row.cached_input_tokens, row.output_tokens) == (200, 600, 300)


@pytest.mark.parametrize("strict, field", [("vllm-reasoning", "reasoning_content"), ("vllm-reasoning", "reasoning"),
                                           ("deepseek", "reasoning_content"), ("think-tags", None)])
@pytest.mark.parametrize("native", [True, False])
def test_thinking_is_kept_apart_and_its_decoys_never_run(tmp_path, strict, field, native):
    RAN.clear()
    if native:
        script = [{"tool_calls": [{"name": "python_exec", "arguments": {"code": "1"}}]},
                  {"tool_calls": [{"name": "submit", "arguments": {"answer": "42"}}]}]
    else:
        script = ["```python\n1\n```", '<tool_call>{"name": "submit", "arguments": {"answer": "42"}}</tool_call>']
    with FakeOpenAIServer(script, strict=strict, reasoning_field=field or "reasoning_content") as srv, \
            context.use(tracer=Tracer(tmp_path)):
        llm = client(srv, native_tools=native)
        res = Agent(llm, ToolSet([submit, python_exec], code_tool="python_exec"), AgentConfig()).run("task")
    assert res.status == "submitted" and res.output == "42" and [r.strip() for r in RAN] == ["python:1", "42"]
    assert srv.refused == []
    # kept in the conversation and the trace, never sent back by default
    assert all(m.get("reasoning_content") == DECOY_THINKING for m in res.messages if m["role"] == "assistant")
    assert not any("reasoning_content" in m or "DECOY" in json.dumps(m) for b in srv.requests for m in b["messages"])
    html = render_html(tmp_path).read_text()
    assert "<details class=thinking><summary>thinking" in html and "&lt;tool_call&gt;" in html
    # the thinking the client did not send back does not make the next call's input look all new
    assert "3 earlier messages as in the previous call, not repeated" in html


def test_deepseek_refusing_thinking_in_input_is_learned_from_an_alias_that_sends_it_back(caplog):
    caplog.set_level(logging.WARNING, logger="triforge.llm")
    RAN.clear()
    script = [{"tool_calls": [{"name": "python_exec", "arguments": {"code": "1"}}]},
              {"tool_calls": [{"name": "python_exec", "arguments": {"code": "2"}}]},
              {"tool_calls": [{"name": "submit", "arguments": {"answer": "42"}}]}]
    with FakeOpenAIServer(script, strict="deepseek") as srv:
        llm = client(srv, send_reasoning_back=True)
        res = Agent(llm, ToolSet([submit, python_exec]), AgentConfig()).run("task")
    assert res.status == "submitted" and RAN == ["python:1", "python:2", "42"]
    assert len(srv.refused) == 1 and len(announcements(caplog)) == 1
    assert llm.refused() == {"reasoning_content": "drop"}


def test_vllm_takes_thinking_back_when_the_alias_says_so():
    with FakeOpenAIServer(["a", "b"], strict="vllm-reasoning") as srv:
        llm = client(srv, send_reasoning_back=True)
        first = llm.complete(HELLO)
        llm.complete([*HELLO, first.message(), {"role": "user", "content": "more"}])
    assert srv.requests[1]["messages"][1] == {"role": "assistant", "content": "a", "reasoning_content": DECOY_THINKING}


def test_azure_gets_the_deployment_path_the_api_version_and_the_api_key_header(monkeypatch):
    monkeypatch.setenv("AZ_KEY", "azure-test-key")
    cfg = {"model": "gpt-5-mini", "api_type": "azure", "api_version": "2024-10-21", "deployment": "my-deployment",
           "api_key_env": "AZ_KEY"}
    with FakeOpenAIServer(["hello"], strict="azure+openai-reasoning") as srv:
        llm = OpenAICompatLLM("az", ModelConfig(base_url=f"http://127.0.0.1:{srv.port}", max_retries=0, **cfg))
        comp = llm.complete(HELLO, temperature=0.0, max_tokens=64, stop=["x"])
    # gpt-5-mini through Azure: the family defaults apply, so nothing is refused
    assert comp.content == "hello" and srv.refused == []
    assert srv.requests == [{"model": "gpt-5-mini", "messages": HELLO, "max_completion_tokens": 64}]


@pytest.mark.parametrize("change, error", [
    ({"api_version": "2023-05-15"}, "not found \\(404\\)"),
    ({"deployment": "other"}, "not found \\(404\\)"),
    ({"key": "wrong"}, "rejected the API key \\(401\\)"),
])
def test_azure_refuses_another_version_deployment_or_key(monkeypatch, change, error):
    monkeypatch.setenv("AZ_KEY", change.pop("key", "azure-test-key"))
    cfg = {"model": "gpt-5-mini", "api_type": "azure", "api_version": "2024-10-21", "deployment": "my-deployment",
           "api_key_env": "AZ_KEY", **change}
    with FakeOpenAIServer(["hello"], strict="azure") as srv:
        llm = OpenAICompatLLM("az", ModelConfig(base_url=f"http://127.0.0.1:{srv.port}", max_retries=0, **cfg))
        with pytest.raises(EndpointError, match=error):
            llm.complete(HELLO)
    assert srv.requests == []


def test_the_cache_replays_thinking_and_token_details(tmp_path):
    from triforge.core.cache import ResponseCache

    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer(["answer"], strict="deepseek") as srv, context.use(cache=cache):
        llm = client(srv)
        live, replay = llm.complete(HELLO), llm.complete(HELLO)
    assert replay.cached and len(srv.requests) == 1
    assert (replay.content, replay.reasoning, replay.usage) == (live.content, live.reasoning, live.usage)


def test_a_422_naming_an_extra_field_is_adapted_as_a_400_is(caplog):
    """Servers that validate the body with pydantic (gateways, FastAPI front ends) answer 422, not 400."""
    import http.server

    seen: list[dict] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            if "temperature" in body:
                status, reply = 422, {"detail": [{"type": "extra_forbidden", "loc": ["body", "temperature"],
                                                  "msg": "Extra inputs are not permitted", "input": 0.0}]}
            else:
                status, reply = 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": "hello"}}]}
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        llm = OpenAICompatLLM("alias", ModelConfig(model="m", base_url=f"http://127.0.0.1:{srv.server_port}/v1",
                                                   max_retries=0, timeout_s=10), learned=Learned())
        with caplog.at_level(logging.WARNING, logger="triforge.llm"):
            assert llm.complete(HELLO, temperature=0.0).content == "hello"
            assert llm.complete(HELLO, temperature=0.0).content == "hello"
    finally:
        srv.shutdown()
        srv.server_close()
    assert ["temperature" in b for b in seen] == [True, False, False]  # refused once, then never sent
    said = announcements(caplog)
    assert len(said) == 1 and "refused 'temperature' (HTTP 422)" in said[0], said
