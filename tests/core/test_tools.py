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
