"""The ReAct loop on the scripted model: submit, limits, budget, format errors, sub-agents."""

from __future__ import annotations

import json
import time

import pytest

from triforge.core import context
from triforge.core.adapter import cut_invented_response
from triforge.core.budget import Budget, BudgetLimits
from triforge.core.errors import Submitted
from triforge.core.react import Agent, AgentConfig, AgentLimits, agent_as_tool
from triforge.core.small_model_policy import OUTPUT_BLOCK, SmallModelPolicy
from triforge.core.tools import tool
from triforge.testing.scripted import ScriptedLLM, ScriptError, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first
        b: second
    """
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails.

    Args:
        reason: why
    """
    raise RuntimeError(f"boom: {reason}")


@tool
def submit(answer: str) -> str:
    """Submit.

    Args:
        answer: the answer
    """
    raise Submitted(answer)


def run(script, limits=None, native=True, tools=(add, explode, submit), **kw):
    llm = ScriptedLLM(script, native_tools=native, **kw)
    agent = Agent(llm, list(tools), AgentConfig(limits=limits or AgentLimits()))
    return llm, agent.run("task")


def test_clean_submit_and_tool_results_reach_the_model():
    llm, res = run([call("add", a=2, b=3), lambda msgs, tools: call("submit", answer=msgs[-1]["content"])])
    assert res.status == "submitted" and res.output == "5" and res.steps == 2
    llm.assert_done()
    assert llm.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_0_0", "content": "5"}


def test_tool_exception_goes_back_to_the_model():
    llm, res = run([call("explode", reason="x"), call("submit", answer="ok")])
    assert res.submitted
    assert "RuntimeError: boom: x" in llm.requests[1]["messages"][-1]["content"]


def test_format_errors_are_fed_back_then_recovered():
    llm, res = run(["no call here", call("add", a=1), call("submit", answer="done")])
    assert res.submitted and res.format_errors == 2
    assert "Format error" in llm.requests[1]["messages"][-1]["content"]
    assert "a: Field required" not in llm.requests[2]["messages"][-1]["content"]
    assert "b: Field required" in llm.requests[2]["messages"][-1]["content"]


def test_consecutive_format_errors_are_capped():
    llm, res = run(["x", "y", "z"], AgentLimits(max_format_errors=3))
    assert res.status == "limits_exceeded" and "3 consecutive format errors" in res.message
    llm.assert_done()


def test_step_limit():
    _, res = run([call("add", a=1, b=1)] * 3, AgentLimits(max_steps=3))
    assert res.status == "limits_exceeded" and res.steps == 3 and "step limit" in res.message


def test_token_and_cost_limits():
    big = {**call("add", a=1, b=1), "usage": {"input_tokens": 600, "output_tokens": 0}}
    _, res = run([big, big], AgentLimits(max_tokens=1000))
    assert res.status == "limits_exceeded" and "token limit" in res.message and res.steps == 2
    _, res = run([big, big], AgentLimits(max_cost_usd=0.001), price_in_per_mtok=1.0)
    assert res.status == "limits_exceeded" and "cost limit" in res.message


def test_wall_time_limit():
    def slow(msgs, tools):
        time.sleep(0.15)
        return call("add", a=1, b=1)

    _, res = run([slow] * 5, AgentLimits(max_wall_s=0.2))
    assert res.status == "limits_exceeded" and "wall-time" in res.message and res.steps == 2


def test_budget_stops_the_run_cleanly(tmp_path):
    llm = ScriptedLLM([call("add", a=1, b=1)] * 5)
    agent = Agent(llm, [add, submit], run_dir=tmp_path)
    with context.use(budget=Budget(BudgetLimits(max_calls=2))):
        res = agent.run("task")
    assert res.status == "budget_exceeded" and res.steps == 3 and llm.remaining == 3
    saved = json.loads((tmp_path / "agent.trajectory.json").read_text())
    assert saved["summary"]["status"] == "budget_exceeded" and len(saved["messages"]) == 6


def test_text_protocol_mode():
    block = '<tool_call>\n{"name": "submit", "arguments": {"answer": "7"}}\n</tool_call>'
    llm, res = run(["thinking...\n" + block], native=False)
    assert res.output == "7"
    assert "<tool_call>" in llm.requests[0]["messages"][0]["content"]
    assert llm.requests[0]["tools"] is None


def test_agent_as_tool():
    inner_llm = ScriptedLLM([call("add", a=20, b=22), lambda m, t: call("submit", answer=m[-1]["content"])])
    helper = agent_as_tool(lambda: Agent(inner_llm, [add, submit], name="adder"), "adder", "Adds numbers.")
    outer = ScriptedLLM([call("adder", task="add 20 and 22"), lambda m, t: call("submit", answer=m[-1]["content"])])
    res = Agent(outer, [helper, submit], name="boss").run("task")
    assert res.output == "42"
    inner_llm.assert_done()


def test_scripted_model_is_strict():
    llm = ScriptedLLM(["a"])
    llm.complete([{"role": "user", "content": "x"}])
    with pytest.raises(ScriptError, match="unexpected call #2"):
        llm.complete([{"role": "user", "content": "x"}])
    with pytest.raises(ScriptError, match="never used"):
        ScriptedLLM(["a", "b"]).assert_done()


def small(**kw):
    return SmallModelPolicy(**{"resample_repeats": 0, "forget_repeats": False, **kw})


def test_a_repeated_reply_is_asked_for_again_at_a_higher_temperature():
    same = call("add", a=1, b=2)
    llm = ScriptedLLM([same, same, call("add", a=2, b=2), "no tool here", "no tool here", "no tool here",
                       call("submit", answer="4")])
    agent = Agent(llm, [add, submit], AgentConfig(temperature=0.0, sample=3), policy=small(resample_repeats=1))
    res = agent.run("task")
    assert res.submitted and res.summary()["resampled"] == 2
    # the repeat of the first call was replaced by the re-asked reply; the second repeat of the plain text stood
    assert [m["content"] for m in res.messages if m["role"] == "tool"] == ["3", "4"]
    assert [(r["temperature"], r["sample"]) for r in llm.requests] == [
        (0.0, 3), (0.0, 3), (0.8, 1003), (0.0, 3), (0.0, 3), (0.8, 1003), (0.0, 3)]
    assert res.steps == 5 and res.format_errors == 2
    llm.assert_done()


def test_without_a_policy_the_loop_has_no_small_model_aids():
    """Every model gets the plain loop: repeats are asked once and run every time, nothing is forgotten,
    the summary has no aid counters."""
    same = call("add", a=1, b=2)
    _, res = run([same, same, same, call("submit", answer="3")])
    assert res.submitted and "resampled" not in res.summary() and "forgotten" not in res.summary()
    assert [m["content"] for m in res.messages if m["role"] == "tool"] == ["3", "3", "3"]


@pytest.mark.parametrize("native", [True, False])
def test_a_call_sent_a_third_time_is_taken_out_of_the_context_not_run(native):
    same, other = call("add", a=1, b=2), call("add", a=5, b=5)
    submit_x = call("submit", answer="x")
    if not native:
        same = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
        other = '<tool_call>{"name": "add", "arguments": {"b": 5, "a": 5}}</tool_call>'
        submit_x = '<tool_call>{"name": "submit", "arguments": {"answer": "x"}}</tool_call>'
    seen_at_forget: list[list[dict]] = []

    def after_forget(msgs, tools):
        seen_at_forget.append(list(msgs))
        return other

    llm = ScriptedLLM([same, other, same, same, after_forget, same, submit_x], native_tools=native)
    res = Agent(llm, [add, submit], policy=small(forget_repeats=True)).run("task")
    assert res.submitted and res.summary()["forgotten"] == 2
    results = [m["content"] for m in res.messages if m["role"] == "tool" or "<tool_response" in m["content"]]
    # `same` ran twice and its exchanges left at its third send (and its fourth); both of `other`'s stayed
    assert len(results) == 2 and all("10" in r for r in results)
    ctx = seen_at_forget[0]
    assert all("'a': 1" not in json.dumps(m) and '"a": 1' not in json.dumps(m) for m in ctx), \
        "the forgotten call's exchanges must leave the context"
    note = ctx[-1]
    assert note["role"] == "user" and "sent the same call 3 times" in note["content"]
    assert "not run" in note["content"] and "3" not in note["content"].replace("3 times", "")
    notes = [m["content"] for m in res.messages if m["role"] == "user" and "sent the same call" in m["content"]]
    assert len(notes) == 1 and "4 times" in notes[0], "one note per call, the latest"
    assert "sent the same call 4 times" in res.messages[-2]["content"]  # at the end, then the submit reply
    assert res.steps == 7
    llm.assert_done()


def test_a_forgotten_call_never_reports_a_result_it_did_not_observe():
    """Issue 17 item 3: in a persistent kernel the same cell gives another result once the state changed.
    The model read `x = 1` when x was 2; now it reads no result for a call that did not run."""
    ns = {"x": 1}

    @tool
    def python_exec(code: str) -> str:
        """Run code in a persistent namespace.

        Args:
            code: source
        """
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(code, ns)  # noqa: S102 - test tool
        return buf.getvalue()

    show, change = call("python_exec", code="print('x =', x)"), call("python_exec", code="x = 2")
    seen: list[str] = []

    def look(msgs, tools):
        seen.append(json.dumps(msgs))
        return call("submit", answer="x")

    llm = ScriptedLLM([show, show, change, show, look])
    res = Agent(llm, [python_exec, submit], policy=small(forget_repeats=True)).run("task")
    assert res.submitted and res.summary()["forgotten"] == 1 and ns["x"] == 2
    assert "x = 1" not in seen[0], "a result from before the state changed was reported as this call's"
    assert "not run" in seen[0]


def test_forgetting_one_call_keeps_the_note_of_another_that_followed_its_exchange():
    a, b = call("add", a=1, b=2), call("add", a=5, b=5)
    seen: list[list[dict]] = []

    def look(msgs, tools):
        seen.append(list(msgs))
        return call("submit", answer="x")

    # a runs, b runs twice and is forgotten at its third send (its note follows a's exchange), a runs again
    # and is forgotten at its third send: b's note must stay
    llm = ScriptedLLM([a, b, b, b, a, a, look])
    res = Agent(llm, [add, submit], policy=small(forget_repeats=True)).run("task")
    assert res.submitted and res.summary()["forgotten"] == 2
    notes = [m["content"] for m in seen[0] if m["role"] == "user" and "sent the same call" in m["content"]]
    assert len(notes) == 2 and "3 times" in notes[0] and "3 times" in notes[1]
    assert not any(m["role"] in ("assistant", "tool") for m in seen[0][1:]), "every exchange was forgotten"


SUBMIT_DONE = '<tool_call>{"name": "submit", "arguments": {"answer": "done"}}</tool_call>'
INVENTED = ("Let me run it.\n```python\nprint(1 + 2)\n<tool_response name=\"python_exec\">\n3\n</tool_response>\n"
            "Great, the answer is 3.\n<tool_call>\n{\"name\": \"submit\", \"arguments\": {\"answer\": \"3\"}}\n</tool_call>")


@tool
def python_exec(code: str) -> str:
    """Run code.

    Args:
        code: source
    """
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {})  # noqa: S102 - test tool
    return buf.getvalue()


def _code_agent(llm, policy=None, **config):
    from triforge.core.tools import ToolSet

    return Agent(llm, ToolSet([python_exec, submit], code_tool="python_exec"), AgentConfig(**config), policy=policy)


def test_a_tool_response_the_model_invents_is_cut_off_by_the_stop_string():
    """Text protocol: a small model writes the tool's answer itself and acts on it. The request carries
    `<tool_response` as a stop string; the real result then comes from the real tool."""
    llm = ScriptedLLM([INVENTED, SUBMIT_DONE], native_tools=False)
    res = _code_agent(llm).run("task")
    assert llm.requests[0]["stop"] == ["<tool_response"]  # the protocol's own result tag, for every model
    assert res.cut_replies == 1 and res.format_errors == 0 and res.output == "done"
    assert res.messages[2]["content"].endswith("print(1 + 2)\n```")  # the fence the cut left open is closed
    assert res.messages[3]["content"] == '<tool_response name="python_exec">\n3\n\n</tool_response>'


def test_native_mode_sends_no_stop_string():
    llm, res = run([call("submit", answer="x")])
    assert llm.requests[0]["stop"] is None


def test_a_server_that_ignores_stop_is_cut_on_the_client():
    """Over real HTTP, against a server that does not honour `stop` (the fake one, like some real ones)."""
    from triforge.core.config import ModelConfig
    from triforge.core.llm import OpenAICompatLLM
    from triforge.testing.fake_server import FakeOpenAIServer

    with FakeOpenAIServer([INVENTED, '<tool_call>{"name": "submit", "arguments": {"answer": "ok"}}</tool_call>']) as srv:
        cfg = ModelConfig(model="fake", base_url=srv.base_url, native_tools=False, timeout_s=5)
        res = _code_agent(OpenAICompatLLM("fake", cfg), small()).run("task")
        assert srv.requests[0]["stop"] == ["<tool_response", OUTPUT_BLOCK]
    assert res.cut_replies == 1 and res.output == "ok"
    assert "Great, the answer is 3" not in json.dumps(res.messages)


def test_cut_invented_response_closes_only_what_it_left_open():
    assert cut_invented_response("plain answer") == ("plain answer", False)
    assert cut_invented_response("```python\nx = 1\n```\nok") == ("```python\nx = 1\n```\nok", False)
    assert cut_invented_response("```python\nx = 1\n```\n<tool_response>x") == ("```python\nx = 1\n```\n", True)
    assert cut_invented_response("```python\nx = 1\n<tool_response>x") == ("```python\nx = 1\n```", True)


def test_a_reply_cut_by_max_tokens_keeps_its_open_fence():
    llm = ScriptedLLM([{"content": "```python\nx = (1 +", "finish_reason": "length"}, SUBMIT_DONE],
                      native_tools=False)
    res = _code_agent(llm).run("task")
    assert res.cut_replies == 0 and res.messages[2]["content"] == "```python\nx = (1 +"


CUT_AT_LIMIT = "```python\ndata = [\n    [1, 0, 0, 0, 1],\n    [1, 0,"


def test_a_reply_cut_at_the_token_limit_is_told_so_over_http():
    """What the 1.5B model did on cpagent `crew` (2026-12-03): it copied a long data table into its cell,
    llama.cpp stopped it at max_tokens (finish_reason "length") with the fence open, and the generic "no
    tool call" message made it write the same reply again, three times, until the run ended. The model is
    told where and why its reply stopped, and to write shorter ones."""
    from triforge.core.config import ModelConfig
    from triforge.core.llm import OpenAICompatLLM
    from triforge.testing.fake_server import FakeOpenAIServer

    script = [{"content": CUT_AT_LIMIT, "finish_reason": "length"}, {"content": "oops, no call"},
              '<tool_call>{"name": "submit", "arguments": {"answer": "ok"}}</tool_call>']
    with FakeOpenAIServer(script) as srv:
        cfg = ModelConfig(model="fake", base_url=srv.base_url, native_tools=False, timeout_s=5)
        from triforge.core.tools import ToolSet

        agent = Agent(OpenAICompatLLM("fake", cfg), ToolSet([python_exec, submit], code_tool="python_exec"),
                      AgentConfig(max_tokens_per_call=768), policy=small())
        res = agent.run("task")
    assert res.output == "ok" and res.format_errors == 2
    told = [m["content"] for m in res.messages if m["role"] == "user" and m["content"].startswith("Format error")]
    assert "cut at the limit of 768 tokens per reply" in told[0] and "shorter" in told[0]
    assert "cut at" not in told[1] and "no tool call" in told[1]  # a reply that simply lacks a call


def test_the_length_cut_message_is_the_policy_s_alone():
    llm = ScriptedLLM([{"content": CUT_AT_LIMIT, "finish_reason": "length"}, SUBMIT_DONE], native_tools=False)
    res = _code_agent(llm).run("task")
    assert res.format_errors == 1 and "no tool call" in res.messages[3]["content"]
    llm = ScriptedLLM([{"content": CUT_AT_LIMIT, "finish_reason": "length"}, SUBMIT_DONE], native_tools=False)
    res = _code_agent(llm, small(explain_length_cut=False)).run("task")
    assert "no tool call" in res.messages[3]["content"]
    llm = ScriptedLLM([{"content": CUT_AT_LIMIT, "finish_reason": "length"}, SUBMIT_DONE], native_tools=False)
    res = _code_agent(llm, small()).run("task")
    assert "cut at the server's token limit" in res.messages[3]["content"]


def test_an_invented_response_right_after_an_opening_fence_is_a_format_error_that_says_why():
    """What the 1.5B model did: it opened a python fence and wrote `<tool_response name="explain_infeasible">`
    straight away. Running the empty block would waste a step; the model is told what went wrong instead."""
    assert cut_invented_response('```python\n<tool_response name="x">\n') == ("", True)
    assert cut_invented_response('Fix:\n```python\n<tool_response name="x">') == ("Fix:", True)
    llm = ScriptedLLM(['```python\n<tool_response name="explain_infeasible">\nnone\n</tool_response>', SUBMIT_DONE],
                      native_tools=False)
    res = _code_agent(llm).run("task")
    assert res.format_errors == 1 and res.cut_replies == 1 and res.output == "done"
    assert "results come only from the harness" in res.messages[3]["content"]


def test_an_invented_output_block_is_cut_so_only_the_first_program_runs():
    """Qwen2.5-Coder writes a ```python block, then a made-up ```output block, then the same program again,
    several times in one reply (cpagent two_numbers, 2026-12-03): run as one cell it printed its JSON three
    times. Cut at the first ```output, the reply holds one program, which prints once."""
    block = "```python\nprint('{\"x\": 7}')\n```\n"
    reply = f"Let's compute.\n{block}```output\n{{\"error\": 1}}\n```\nThat failed; again.\n{block}```output\n1\n```\n"
    llm = ScriptedLLM([reply, SUBMIT_DONE], native_tools=False)
    res = _code_agent(llm, small()).run("task")
    assert llm.requests[0]["stop"] == ["<tool_response", OUTPUT_BLOCK]
    assert res.format_errors == 0  # the scripted model honours `stop` as llama.cpp does: cut before the loop sees it
    assert res.messages[2]["content"] == "Let's compute.\n" + block
    assert res.messages[3]["content"] == '<tool_response name="python_exec">\n{"x": 7}\n\n</tool_response>'
    # a server that ignores `stop`
    assert cut_invented_response(reply, ("<tool_response", OUTPUT_BLOCK)) == ("Let's compute.\n" + block, True)
    assert cut_invented_response(reply)[1] is False  # without the policy a ```output block is the model's text


@tool
def plus(a: int, b: int) -> int:
    """Add, under another name.

    Args:
        a: first
        b: second
    """
    return a + b


SUBMIT_OK = '<tool_call>\n{"name": "submit", "arguments": {"answer": "ok"}}\n</tool_call>'


@pytest.mark.parametrize("native", [True, False])
def test_bare_arguments_are_read_as_the_one_tool_they_fit_only_when_asked(native):
    """Qwen2.5-Coder-1.5B in astra's planning role handed in `{"plans": [...]}` without the call around it."""
    replies = ['Plans:\n```json\n{"a": 2, "b": 5}\n```', '{"answer": "7"}']
    llm = ScriptedLLM(list(replies), native_tools=native)
    res = Agent(llm, [add, submit], AgentConfig(), policy=small(read_bare_arguments=True)).run("task")
    assert res.submitted and res.output == "7" and res.summary()["bare_arguments"] == 2 and res.format_errors == 0
    for policy in (None, small()):  # not without the aid, nor in the small-model policy's default
        llm = ScriptedLLM([*replies, SUBMIT_OK.replace("ok", "7")], native_tools=native)
        res = Agent(llm, [add, submit], AgentConfig(), policy=policy).run("task")
        assert res.submitted and res.format_errors == 2


@pytest.mark.parametrize("reply", [
    '{"a": 2, "b": 5}',  # fits two tools (add, plus): no guess
    '{"a": 2}',  # a required argument missing
    '{"a": 2, "b": 5, "c": 1}',  # an argument no tool has
    'I would call {"answer": "7"}',  # prose around unfenced JSON
    '```json\n{"answer": "7"}\n```\n```json\n{"answer": "8"}\n```',  # two objects: which one?
    '{"answer": ["not", "a", "string"]}',  # fits by name, not by type
    '{"name": "submit", "arguments": {"answer": "7", "extra": 1}}',  # a call envelope, not bare arguments
    '[]', '{}', '"7"',
])
def test_bare_arguments_that_fit_no_single_tool_stay_a_format_error(reply):
    llm = ScriptedLLM([reply, SUBMIT_OK], native_tools=False)
    res = Agent(llm, [add, plus, submit], AgentConfig(), policy=small(read_bare_arguments=True)).run("task")
    assert res.submitted and res.output == "ok" and res.format_errors == 1 and res.summary()["bare_arguments"] == 0
