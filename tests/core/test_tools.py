"""Tool schemas from signatures, the text protocol, leaked-call recovery and format errors."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triforge.core.errors import FormatError
from triforge.core.llm import Completion, ToolCall
from triforge.core.tools import ToolSet, tool


@tool
def search(query: str, k: int = 3, mode: Literal["bm25", "dense"] = "bm25") -> str:
    """Search the corpus.

    Args:
        query: what to look for
        k: how many results
        mode: retrieval method
    """
    return f"{query}:{k}:{mode}"


@tool
def finish(answer: str) -> str:
    """Finish with an answer.

    Args:
        answer: the final answer
    """
    return answer


TOOLS = ToolSet([search, finish])


def test_schema_from_signature_and_docstring():
    fn = search.openai_schema()["function"]
    assert fn["name"] == "search" and fn["description"] == "Search the corpus."
    props = fn["parameters"]["properties"]
    assert props["query"] == {"type": "string", "description": "what to look for"}
    assert props["k"]["default"] == 3 and props["k"]["type"] == "integer"
    assert props["mode"]["enum"] == ["bm25", "dense"]
    assert fn["parameters"]["required"] == ["query"]


def native(*calls: tuple[str, str]) -> Completion:
    return Completion(content=None, tool_calls=[ToolCall(f"c{i}", n, a) for i, (n, a) in enumerate(calls)])


def test_native_call_validated():
    [c] = TOOLS.parse(native(("search", '{"query": "x", "k": 5}')), native=True)
    assert c.tool is search and c.arguments == {"query": "x", "k": 5, "mode": "bm25"}


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("nope", "{}", "unknown tool 'nope'"),
        ("search", '{"query": ', "not valid JSON"),
        ("search", "{}", "query: Field required"),
        ("search", '{"query": "x", "k": "many"}', "k: Input should be a valid integer"),
        ("search", '{"query": "x", "bogus": 1}', "bogus: Extra inputs are not permitted"),
        ("search", "[1, 2]", "must be a JSON object"),
    ],
)
def test_malformed_native_calls_are_format_errors(name, args, message):
    with pytest.raises(FormatError, match=message):
        TOOLS.parse(native((name, args)), native=True)


def test_text_protocol_blocks():
    text = 'I will search.\n<tool_call>\n{"name": "search", "arguments": {"query": "cats"}}\n</tool_call>'
    [c] = TOOLS.parse(Completion(content=text), native=False)
    assert c.arguments["query"] == "cats"
    assert "<tool_call>" in TOOLS.text_protocol() and "search" in TOOLS.text_protocol()


def test_text_without_call_is_format_error():
    with pytest.raises(FormatError, match="no <tool_call> block"):
        TOOLS.parse(Completion(content="I think the answer is 4."), native=False)
    with pytest.raises(FormatError, match="no tool call"):
        TOOLS.parse(Completion(content="I think the answer is 4."), native=True)


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "finish", "arguments": {"answer": "4"}}',
        '[{"name": "finish", "arguments": {"answer": "4"}}]',
        '```json\n{"name": "finish", "arguments": {"answer": "4"}}\n```',
        '<tool_call>\n{"name": "finish", "arguments": {"answer": "4"}}\n</tool_call>',
        '{"type": "function", "function": {"name": "finish", "arguments": {"answer": "4"}}}',
    ],
)
def test_leaked_calls_recovered(content):
    [c] = TOOLS.parse(Completion(content=content), native=True)
    assert c.tool is finish and c.arguments == {"answer": "4"}


@pytest.mark.parametrize(
    "content",
    [
        'Sure! {"name": "finish", "arguments": {"answer": "4"}}',  # prose around it
        '{"name": "rm_rf", "arguments": {}}',  # unknown tool
        '{"answer": "4"}',  # not a call
        '[{"name": "finish", "arguments": {"answer": "4"}}, {"name": "nope"}]',  # one unknown
    ],
)
def test_content_that_is_not_only_calls_is_not_recovered(content):
    assert TOOLS.recover_leaked(content) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(query=st.text(max_size=200), k=st.integers(-10**6, 10**6), prose=st.text(max_size=100))
def test_text_protocol_round_trip(query, k, prose):
    block = json.dumps({"name": "search", "arguments": {"query": query, "k": k}})
    text = prose.replace("<tool_call>", "") + f"\n<tool_call>\n{block}\n</tool_call>"
    [c] = TOOLS.parse(Completion(content=text), native=False)
    assert c.arguments["query"] == query and c.arguments["k"] == k


def test_a_string_argument_holding_the_closing_tag_stays_in_its_block():
    """Found by the property above (query='</tool_call>'): the block ended at the tag inside the JSON string."""
    one = json.dumps({"name": "search", "arguments": {"query": "</tool_call>", "k": 1}})
    two = json.dumps({"name": "search", "arguments": {"query": "b", "k": 2}})
    calls = TOOLS.parse(Completion(content=f"<tool_call>{one}</tool_call> and <tool_call>\n{two}\n</tool_call>"),
                        native=False)
    assert [(c.arguments["query"], c.arguments["k"]) for c in calls] == [("</tool_call>", 1), ("b", 2)]
    with pytest.raises(FormatError, match="block 2 is not valid JSON"):
        TOOLS.parse(Completion(content=f"<tool_call>{one}</tool_call><tool_call>{{oops</tool_call>"), native=False)
    with pytest.raises(FormatError, match="not valid JSON"):  # trailing words inside the block
        TOOLS.parse(Completion(content=f"<tool_call>{two} thanks</tool_call>"), native=False)


def test_a_leaked_call_holding_the_closing_tag_is_still_recovered():
    """Native mode, a call leaked into content as a <tool_call> block whose string holds `</tool_call>`:
    the whole content is that one call, not a call plus stray text."""
    one = json.dumps({"name": "search", "arguments": {"query": "x</tool_call>y", "k": 1}})
    [c] = TOOLS.parse(Completion(content=f"<tool_call>\n{one}\n</tool_call>"), native=True)
    assert (c.arguments["query"], c.arguments["k"]) == ("x</tool_call>y", 1)
    assert TOOLS.recover_leaked(f"<tool_call>{one}</tool_call> and more words") is None


@settings(max_examples=300, deadline=None)
@given(content=st.text(max_size=300) | json_values.map(json.dumps))
def test_any_reply_parses_or_is_a_format_error(content):
    for is_native in (True, False):
        try:
            calls = TOOLS.parse(Completion(content=content), native=is_native)
        except FormatError:
            continue
        assert calls and all(c.tool.name in TOOLS.tools for c in calls)


@settings(max_examples=200, deadline=None)
@given(args=st.dictionaries(st.text(max_size=10), json_values, max_size=4))
def test_random_arguments_never_crash_validation(args):
    try:
        [c] = TOOLS.parse(native(("search", json.dumps(args))), native=True)
    except FormatError:
        return
    assert isinstance(c.arguments["query"], str)


@tool
def python_exec(code: str) -> str:
    """Run code.

    Args:
        code: Python source
    """
    return code


@tool
def submit(code: str) -> str:
    """Hand in a program.

    Args:
        code: the whole program
    """
    return code


CODE_TOOLS = ToolSet([python_exec, submit, finish], code_tool="python_exec")


def text(content: str) -> Completion:
    return Completion(content=content)


def test_plain_python_block_calls_the_code_tool():
    reply = "Let me build it.\n```python\nx = 1\nprint(x)\n```\nThat should print 1."
    [c] = CODE_TOOLS.parse(text(reply), native=False)
    assert c.tool is python_exec and c.arguments == {"code": "x = 1\nprint(x)\n"}
    assert "```python" in CODE_TOOLS.text_protocol() and "```submit" in CODE_TOOLS.text_protocol()


def test_several_plain_blocks_run_together_in_order():
    reply = "```python\nn = 7\n```\nthen\n```py\nprint(n)\n```"
    [c] = CODE_TOOLS.parse(text(reply), native=False)
    assert c.arguments["code"] == "n = 7\n\nprint(n)\n"


def test_block_fenced_with_a_tool_name_calls_that_tool():
    reply = "Done.\n```submit\nprint('{}')\n```"
    [c] = CODE_TOOLS.parse(text(reply), native=False)
    assert c.tool is submit and c.arguments["code"] == "print('{}')\n"


def test_unclosed_block_is_not_a_call():
    # A reply cut off by its token cap must not run half a program.
    with pytest.raises(FormatError, match="```python block"):
        CODE_TOOLS.parse(text("Here:\n```python\nimport cpmpy as cp\nx = cp.int"), native=False)


def test_other_languages_are_not_calls():
    with pytest.raises(FormatError, match="no tool call"):
        CODE_TOOLS.parse(text("Upgrade it:\n```bash\npip install --upgrade cpmpy\n```"), native=False)


def test_tool_call_block_wins_over_code_blocks():
    reply = ('```python\nprint(1)\n```\n<tool_call>\n{"name": "finish", "arguments": {"answer": "4"}}\n'
             "</tool_call>")
    [c] = CODE_TOOLS.parse(text(reply), native=False)
    assert c.tool is finish


def test_broken_json_call_falls_back_to_the_code_block():
    reply = '```python\nprint(2)\n```\n<tool_call>\n{"name": "python_exec", "arguments": {"code": "print(\n2)"}}\n</tool_call>'
    [c] = CODE_TOOLS.parse(text(reply), native=False)
    assert c.tool is python_exec and c.arguments["code"] == "print(2)\n"


def test_without_code_tool_python_blocks_are_not_calls():
    plain = ToolSet([python_exec, finish])
    with pytest.raises(FormatError, match="no <tool_call> block"):
        plain.parse(text("```python\nprint(1)\n```"), native=False)
    # native mode never reads code blocks: the endpoint has real tool calls
    with pytest.raises(FormatError):
        CODE_TOOLS.parse(text("```python\nprint(1)\n```"), native=True)


def test_code_tool_must_take_only_code():
    with pytest.raises(ValueError, match="only argument is `code`"):
        ToolSet([search, python_exec], code_tool="search")


def test_the_adapter_shapes_requests_and_messages_per_protocol():
    from triforge.core.adapter import RESULT_TAG, ChatAdapter

    nat, text = ChatAdapter(TOOLS, native=True), ChatAdapter(TOOLS, native=False, result_markers=("```output",))
    assert nat.request() == {"tools": TOOLS.schemas(), "stop": None} and nat.system("S") == "S"
    assert text.request() == {"tools": None, "stop": [RESULT_TAG, "```output"]}
    assert text.system("S").startswith("S\n\n") and "<tool_call>" in text.system("S")
    comp = native(("search", '{"query": "x"}'))
    calls = nat.parse(comp)
    assert nat.assistant(comp, calls)["tool_calls"][0]["function"]["name"] == "search"
    assert nat.observation(calls[0], "r") == {"role": "tool", "tool_call_id": "c0", "content": "r"}
    assert text.observation(calls[0], "r")["content"] == '<tool_response name="search">\nr\n</tool_response>'
    reply = Completion(content='<tool_call>{"name": "finish", "arguments": {"answer": "a"}}</tool_call>\n```output\n1')
    assert text.read(reply) and "```output" not in reply.content and text.parse(reply)[0].arguments == {"answer": "a"}


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize(
    "content",
    [
        '{"name": "finish", "arguments": {"answer": "4", "extra": 1}}',
        '{"name": "search", "arguments": {"additionalProperties": false, "properties": {}, "type": "object"}}',
        '```json\n{"name": "search", "arguments": {"k": "many"}}\n```',
    ],
)
def test_a_bare_call_with_bad_arguments_is_told_its_arguments_not_that_it_made_no_call(content, native):
    """Seen from Qwen2.5-Coder-1.5B in astra's planning role: the reply was a bare call whose arguments were
    the tool's schema, and the loop answered "no <tool_call> block" three times, so it never learned why."""
    with pytest.raises(FormatError, match="not a valid one: bad arguments for tool") as err:
        TOOLS.parse(Completion(content=content), native=native)
    assert "no <tool_call> block" not in str(err.value) and "no tool call" not in str(err.value)


def test_the_missing_block_message_names_every_tool_not_only_the_first():
    """The example named the first tool only, and a planning agent whose job was `submit_plans` copied
    `timings` from it."""
    with pytest.raises(FormatError) as err:
        TOOLS.parse(Completion(content="Here are my plans: 1. vectorize."), native=False)
    assert "one of: search, finish" in str(err.value)
