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
from triforge.testing.fake_server import FakeOpenAIServer
from triforge.testing.scripted import call
from triforge.ui.trace_view import render_html, summarize

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


@pytest.mark.parametrize("junk", ["not json at all", '["a", "list"]', '{"no": "kind"}', "\x00\x01binary"])
def test_a_corrupt_trace_is_a_user_error_naming_the_line(tmp_path, junk):
    t = Tracer(tmp_path)
    with t.span("first"):
        pass
    with (tmp_path / "trace.jsonl").open("a") as f:
        f.write(junk + "\n")
    with t.span("after"):
        pass
    for reader in (summarize, render_html):
        with pytest.raises(UserError, match=r"trace.jsonl line 2 is not a triforge span.*corrupt"):
            reader(tmp_path)


def test_a_trace_of_only_junk_is_corrupt_but_a_torn_last_line_is_not(tmp_path):
    (tmp_path / "trace.jsonl").write_text("garbage\n")
    with pytest.raises(UserError, match="line 1"):
        summarize(tmp_path)
    t = Tracer(tmp_path / "ok")
    with t.span("s"):
        pass
    with (tmp_path / "ok" / "trace.jsonl").open("a") as f:
        f.write('{"name": "half')
    assert summarize(tmp_path / "ok")["agent"]["-"].calls == 0


def test_the_trace_file_itself_is_accepted(tmp_path):
    t = Tracer(tmp_path)
    t.tool_span("echo", {"text": "x"}, "x", 0.01)
    assert summarize(tmp_path / "trace.jsonl")["agent"]["-"].tool_calls == 1
    assert render_html(tmp_path / "trace.jsonl") == tmp_path / "trace.html"


def _llm_span(t: Tracer, model: str) -> None:
    from triforge.core.llm import Completion, Usage

    comp = Completion(content="ok", tool_calls=[], usage=Usage(3, 4), model=model, finish_reason="stop")
    t.llm_span(model, ModelConfig(model=model, base_url="http://127.0.0.1:1/v1"), {"messages": []}, comp, 0.1, 1)


def test_tool_calls_count_for_the_model_that_asked_for_them(tmp_path):
    from triforge.core.trace import agent_scope

    t = Tracer(tmp_path)
    with agent_scope("planner"):
        _llm_span(t, "big")
        t.tool_span("look", {}, "x", 0.01)
    with agent_scope("coder"):
        _llm_span(t, "small")
        t.tool_span("run", {}, "x", 0.01)
        t.tool_span("run", {}, "y", 0.01)
    with agent_scope("planner"):
        t.tool_span("look", {}, "z", 0.01)  # after the coder's calls: still the planner's model
    by_model = summarize(tmp_path)["model"]
    assert (by_model["big"].calls, by_model["big"].tool_calls) == (1, 2)
    assert (by_model["small"].calls, by_model["small"].tool_calls) == (1, 2)


def _details(page: str, kind: str) -> list[str]:
    import re

    return re.findall(rf"<details class='{kind}[^']*'>(.*?)</details>", page, flags=re.S)


def test_html_says_what_ran_how_it_ended_and_shows_only_new_messages(tmp_path):
    code = "total = 0\nfor i in range(3):\n    total += i\nprint(total)"
    script = [
        {"content": "Let me compute.", "tool_calls": [{"name": "echo", "arguments": {"text": code}}]},
        call("submit", answer="3"),
    ]
    with FakeOpenAIServer(script) as srv:
        llm = OpenAICompatLLM("fk", ModelConfig(model="fake-model", base_url=srv.base_url))
        with context.use(tracer=Tracer(tmp_path)):
            res = Agent(llm, [echo, submit], name="solver").run("THE-ORIGINAL-TASK-TEXT")
    assert res.submitted
    (tmp_path / "config.json").write_text(json.dumps({"task": "sum_problem", "model": {"alias": "fk",
                                                                                       "model": "fake-model"}}))
    (tmp_path / "results.json").write_text(json.dumps({"problem": "sum_problem", "status": "submitted", "steps": 2,
                                                       "grade": {"status": "correct", "reasons": []}}))
    page = render_html(tmp_path).read_text()
    header = page.split("<header>")[1].split("</header>")[0]
    assert "sum_problem" in header and "fk" in header and "badge ok'>correct" in header
    assert "<details class='step err'>" not in page
    assert "<details class='step done'>" in page  # the submitting step is a success
    assert "<pre class=code>total = 0\nfor i in range(3):\n    total += i\nprint(total)</pre>" in page
    first, second = _details(page, "llm")
    assert "THE-ORIGINAL-TASK-TEXT" in first and "THE-ORIGINAL-TASK-TEXT" not in second
    assert "as in the previous call" in second
    assert "id=open-all" in page and "script-src 'sha256-" in page


def test_parallel_runs_of_one_agent_are_separate_conversations(tmp_path):
    """Two examples of a benchmark run the same agent in parallel: each call's 'new input' is relative to its own
    conversation, not to whichever call of that agent came before it in the file."""

    def llm(span_id: str, parent: str, start: float, msgs: list[dict], out: str) -> dict:
        return {"trace_id": "t", "span_id": span_id, "parent_id": parent, "name": "chat m", "kind": "llm",
                "start": start, "end": start + 0.1, "duration_s": 0.1, "agent": "qa", "status": "ok",
                "attributes": {"gen_ai.input.messages": msgs,
                               "gen_ai.output.messages": [{"role": "assistant", "content": out}]}}

    sys_msg = {"role": "system", "content": "answer"}
    a1, b1 = [sys_msg, {"role": "user", "content": "QUESTION-A"}], [sys_msg, {"role": "user", "content": "QUESTION-B"}]
    spans = [
        {"trace_id": "t", "span_id": "exA", "parent_id": None, "name": "example A", "kind": "internal", "start": 0,
         "end": 9, "duration_s": 9, "agent": None, "status": "ok", "attributes": {}},
        {"trace_id": "t", "span_id": "exB", "parent_id": None, "name": "example B", "kind": "internal", "start": 0.5,
         "end": 9, "duration_s": 8.5, "agent": None, "status": "ok", "attributes": {}},
        llm("a1", "exA", 1, a1, "ANSWER-A"),
        llm("b1", "exB", 2, b1, "ANSWER-B"),
        llm("a2", "exA", 3, [*a1, {"role": "assistant", "content": "ANSWER-A"},
                             {"role": "user", "content": "FOLLOW-UP-A"}], "done"),
    ]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(s) + "\n" for s in spans))
    page = render_html(tmp_path).read_text()
    a_1, a_2, b_1 = _details(page, "llm")  # shown under their examples: A's two calls, then B's
    assert "QUESTION-B" in b_1 and "as in the previous call" not in b_1  # B's first call is shown whole
    assert "FOLLOW-UP-A" in a_2 and "QUESTION-A" not in a_2 and "3 earlier messages" in a_2
