"""Spans, secret redaction, the HTML view and the summary."""

from __future__ import annotations

import json

import pytest

from triforge.core import context
from triforge.core.config import ModelConfig
from triforge.core.errors import Submitted, UserError
from triforge.core.llm import OpenAICompatLLM
from triforge.core.react import Agent
from triforge.core.tools import tool
from triforge.core.trace import Tracer, read_spans, redact
from triforge.core.trace_view import render_html, summarize
from triforge.testing.fake_server import FakeOpenAIServer
from triforge.testing.scripted import call

SECRET = "sk-live-THISISASECRETKEY1234567890"


@tool
def echo(text: str) -> str:
    """Echo text back.

    Args:
        text: what to echo
    """
    return text


@tool
def submit(answer: str) -> str:
    """Submit.

    Args:
        answer: the answer
    """
    raise Submitted(answer)


def test_redaction_at_any_depth():
    out = redact({"headers": {"Authorization": f"Bearer {SECRET}", "x": 1}, "api_key": SECRET,
                  "gen_ai.usage.input_tokens": 5, "msg": [f"my key is {SECRET}"]})
    assert SECRET not in json.dumps(out)
    assert out["gen_ai.usage.input_tokens"] == 5 and out["headers"]["x"] == 1


def test_agent_run_traced_over_http_without_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", SECRET)
    script = [
        {"content": "<script>alert(1)</script>", "tool_calls": [{"name": "echo", "arguments": {"text": f"<b>{SECRET}</b>"}}]},
        call("submit", answer="done"),
    ]
    with FakeOpenAIServer(script) as srv:
        llm = OpenAICompatLLM("fk", ModelConfig(model="fake-model", base_url=srv.base_url, api_key_env="FAKE_KEY",
                                                price_in_per_mtok=2.0))
        with context.use(tracer=Tracer(tmp_path)):
            res = Agent(llm, [echo, submit], name="solver").run("go")
    assert res.submitted
    raw = (tmp_path / "trace.jsonl").read_text()
    assert SECRET not in raw
    spans = read_spans(tmp_path)
    kinds = [s["kind"] for s in spans]
    assert kinds.count("llm") == 2 and kinds.count("tool") == 2 and kinds.count("step") == 2
    llm_span = next(s for s in spans if s["kind"] == "llm")
    assert llm_span["attributes"]["gen_ai.request.model"] == "fake-model"
    assert llm_span["attributes"]["gen_ai.usage.input_tokens"] > 0
    step_ids = {s["span_id"] for s in spans if s["kind"] == "step"}
    assert all(s["parent_id"] in step_ids for s in spans if s["kind"] in ("llm", "tool"))
    assert {s["attributes"].get("gen_ai.tool.name") for s in spans if s["kind"] == "tool"} == {"echo", "submit"}

    html = render_html(tmp_path).read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert SECRET not in html and "http://" not in html.split("<h1>")[0]
    summary = summarize(tmp_path)
    assert summary["agent"]["solver"].calls == 2 and summary["agent"]["solver"].tool_calls == 2
    assert summary["model"]["fk"].cost_usd > 0


def test_torn_last_line_is_skipped(tmp_path):
    t = Tracer(tmp_path)
    with t.span("ok-span"):
        pass
    with (tmp_path / "trace.jsonl").open("a") as f:
        f.write('{"name": "half')
    assert [s["name"] for s in read_spans(tmp_path)] == ["ok-span"]


def test_span_records_errors(tmp_path):
    t = Tracer(tmp_path)
    with pytest.raises(ValueError), t.span("failing"):
        raise ValueError("nope")
    assert read_spans(tmp_path)[0]["status"].startswith("error: ValueError")


def test_view_of_missing_run_is_user_error(tmp_path):
    with pytest.raises(UserError, match="no trace.jsonl"):
        render_html(tmp_path / "nothing")
