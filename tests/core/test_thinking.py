"""Thinking is kept, never executed: thinking blocks, in every spelling models use, are split from the answer
before calls are parsed."""

from __future__ import annotations

import pytest

from triforge.core.adapter import ChatAdapter, parse_calls
from triforge.core.errors import FormatError, Submitted
from triforge.core.llm import Completion, ToolCall
from triforge.core.react import Agent, AgentConfig
from triforge.core.thinking import split_thinking
from triforge.core.tools import ToolSet, tool
from triforge.testing.scripted import ScriptedLLM

RAN: list[str] = []


@tool
def submit(answer: str) -> str:
    """Submit the answer.

    Args:
        answer: the answer
    """
    RAN.append(f"submit:{answer}")
    raise Submitted(answer)


@tool
def python_exec(code: str) -> str:
    """Run Python code.

    Args:
        code: the code
    """
    RAN.append(f"python:{code}")
    return "ran"


DECOY_CALL = '<tool_call>\n{"name": "submit", "arguments": {"answer": "DECOY"}}\n</tool_call>'
DECOY_CODE = "```python\nraise SystemExit('DECOY')\n```"
REAL_CALL = '<tool_call>\n{"name": "submit", "arguments": {"answer": "42"}}\n</tool_call>'


@pytest.mark.parametrize("text, thinking, answer", [
    ("<think>plan</think>answer", "plan", "answer"),
    ("  \n<think>\nplan\n</think>\n\nanswer", "plan", "answer"),
    ("<think >plan</ think >answer", "plan", "answer"),
    ("< think>plan<  /think>answer", "plan", "answer"),
    ("<THINK>plan</THINK>answer", "plan", "answer"),
    ("<think>one</think>\n<think>two</think>\nanswer", "one\n\ntwo", "answer"),
    ("<think>cut off while thinking, " + DECOY_CALL, "cut off while thinking, " + DECOY_CALL, ""),
    ("<think></think>answer", "", "answer"),
    # a template that opened the block in the prompt: only the closing tag, on its own line
    ("plan with " + DECOY_CALL + "\n</think>\n\nanswer", "plan with " + DECOY_CALL, "answer"),
    # other spellings: Claude-style and fine-tunes, Seed-OSS, Magistral, Kimi, gpt-oss's raw harmony format
    ("<thinking>plan</thinking>answer", "plan", "answer"),
    ("<Thought>plan</Thought>\nanswer", "plan", "answer"),
    ("<reasoning>\nplan\n</reasoning>\nanswer", "plan", "answer"),
    ("<seed:think>plan</seed:think>answer", "plan", "answer"),
    ("[THINK]plan[/THINK]answer", "plan", "answer"),
    ("◁think▷plan◁/think▷answer", "plan", "answer"),
    ("<|channel|>analysis<|message|>plan<|end|><|start|>assistant<|channel|>final<|message|>answer<|return|>",
     "plan", "answer"),
    ("plan\n</thinking>\nanswer", "plan", "answer"),
    ("plan\n[/THINK]\nanswer", "plan", "answer"),
    # a block later in the reply (interleaved thinking: MiniMax), and one cut off there
    ("Let me look.\n<think>\n" + DECOY_CALL + "\n</think>\nanswer", DECOY_CALL, "Let me look.\nanswer"),
    ("first\n<think>one</think>\nsecond\n  <thinking>two</thinking>\nthird", "one\n\ntwo",
     "first\nsecond\nthird"),
    ("answer so far\n<think>cut off " + DECOY_CODE, "cut off " + DECOY_CODE, "answer so far"),
    # a closing tag of another spelling does not end the block
    ("<think>a </thinking> still thinking " + DECOY_CALL, "a </thinking> still thinking " + DECOY_CALL, ""),
])
def test_leading_thinking_is_split_in_every_variant(text, thinking, answer):
    assert split_thinking(text) == (thinking, answer)


@pytest.mark.parametrize("text", [
    "The answer mentions <think> tags in the middle.",
    'Code: <tool_call>{"name": "python_exec", "arguments": {"code": "s.split(\'</think>\')"}}</tool_call>',
    "a closing tag inline </think> is not a line of its own",
    "Models write <thinking> or [THINK] tags; this sentence only names them.",
    "print('<think>')\n```python\nx = '<reasoning>'\n```",
    "<thinker>is not a thinking tag</thinker>",
    "[think] in lower case is text",
    "",
    None,
])
def test_honest_content_is_left_alone(text):
    assert split_thinking(text) == (None, text)


@pytest.mark.parametrize("native", [False, True])
def test_a_decoy_call_or_code_block_inside_think_never_runs_and_the_real_call_does(native):
    tools = ToolSet([submit, python_exec], code_tool="python_exec")
    comp = Completion(content=f"<think>\nMaybe {DECOY_CALL} or\n{DECOY_CODE}\n</think>\n{REAL_CALL}")
    calls = parse_calls(tools, comp, native=native)
    assert [(c.tool.name, c.arguments) for c in calls] == [("submit", {"answer": "42"})]
    assert "DECOY" not in comp.content and "DECOY" in comp.reasoning


@pytest.mark.parametrize("opening, closing", [("<think>", "</think>"), ("<thinking>", "</thinking>"),
                                              ("<seed:think>", "</seed:think>"), ("[THINK]", "[/THINK]"),
                                              ("◁think▷", "◁/think▷"), ("<|channel|>analysis<|message|>", "<|end|>")])
@pytest.mark.parametrize("before", ["", "I will check first.\n"])
def test_a_decoy_inside_any_spelling_of_thinking_never_runs(opening, closing, before):
    tools = ToolSet([submit, python_exec], code_tool="python_exec")
    comp = Completion(content=f"{before}{opening}\nMaybe {DECOY_CALL} or\n{DECOY_CODE}\n{closing}\n{REAL_CALL}")
    calls = parse_calls(tools, comp, native=False)
    assert [(c.tool.name, c.arguments) for c in calls] == [("submit", {"answer": "42"})]
    assert "DECOY" not in comp.content and "DECOY" in comp.reasoning


@pytest.mark.parametrize("thinking", [DECOY_CALL, DECOY_CODE])
def test_a_reply_that_only_thinks_is_a_format_error_not_a_call(thinking):
    tools = ToolSet([submit, python_exec], code_tool="python_exec")
    with pytest.raises(FormatError, match="no tool call"):
        parse_calls(tools, Completion(content=f"<think>{thinking}</think>I am done."), native=False)


def test_native_calls_beside_a_reasoning_field_are_the_only_calls():
    tools = ToolSet([submit])
    comp = Completion(content="", reasoning=DECOY_CALL,
                      tool_calls=[ToolCall("c1", "submit", '{"answer": "42"}')])
    assert [c.arguments for c in parse_calls(tools, comp, native=True)] == [{"answer": "42"}]


def test_the_loop_runs_only_the_call_after_the_thinking_and_keeps_the_thinking_in_the_conversation():
    RAN.clear()
    llm = ScriptedLLM([f"<think>{DECOY_CODE}\n{DECOY_CALL}</think>\nLet me check.\n```python\nprint(1)\n```",
                       f"<think>{DECOY_CALL}</think>{REAL_CALL}"], native_tools=False)
    res = Agent(llm, ToolSet([submit, python_exec], code_tool="python_exec"), AgentConfig()).run("task")
    assert res.status == "submitted" and res.output == "42"
    assert RAN == ["python:print(1)\n", "submit:42"]
    replies = [m for m in res.messages if m["role"] == "assistant"]
    assert all("DECOY" in m["reasoning_content"] and "DECOY" not in m["content"] for m in replies)


def test_the_adapter_reads_thinking_before_cutting_an_invented_result():
    adapter = ChatAdapter(ToolSet([submit]), native=False)
    comp = Completion(content="<think>I will write <tool_response> myself</think>" + REAL_CALL
                      + '\n<tool_response name="submit">ok</tool_response>')
    assert adapter.read(comp) is True
    assert comp.content.strip() == REAL_CALL and "<tool_response>" in comp.reasoning
