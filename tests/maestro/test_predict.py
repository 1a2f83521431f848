"""The llm node adapter: prompts from node config, robust reply parsing, strict failure."""

from __future__ import annotations

import pytest

from triforge.maestro.nodes import LLMNode
from triforge.maestro.predict import ParseError, build_messages, coerce, parse_reply, predict
from triforge.testing.scripted import ScriptedLLM

TYPES = {"question": "str", "passages": "list[str]", "answer": "str", "n": "int", "names": "list[str]"}


def node(**kw) -> LLMNode:
    base = dict(name="qa", inputs={"question": "question", "passages": "passages"},
                outputs={"answer": "answer", "n": "n"}, instruction="Answer from the passages.")
    return LLMNode(**{**base, **kw})


def test_prompt_has_instruction_fields_format_demos_and_inputs():
    n = node(demos=[{"question": "Q0", "passages": ["d1"], "answer": "A0", "n": 1}],
             descriptions={"answer": "a short phrase"}, reasoning=True)
    msgs = build_messages(n, {"question": "Where?", "passages": ["first", "second"]}, TYPES)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    system = msgs[0]["content"]
    assert system.startswith("Answer from the passages.")
    assert "- answer (str): a short phrase" in system and "- n (int)" in system
    assert 'exactly these keys: "reasoning", "answer", "n"' in system
    assert msgs[2]["content"] == '{"answer": "A0", "n": 1}'
    assert "<passages>\n[1] first\n[2] second\n</passages>" in msgs[3]["content"]
    assert "<question>\nWhere?\n</question>" in msgs[3]["content"]


def test_markers_format_prompt():
    msgs = build_messages(node(format="markers"), {"question": "q", "passages": []}, TYPES)
    assert "<answer>...</answer> <n>...</n>" in msgs[0]["content"]
    assert "(none)" in msgs[-1]["content"]


@pytest.mark.parametrize("reply", [
    '{"answer": "Paris", "n": 3}',
    'Sure! ```json\n{"answer": "Paris", "n": "3"}\n``` hope that helps',
    'The result: {"answer": "Paris", "n": 3',  # cut off: repaired
    "{'answer': 'Paris', 'n': 3}",  # single quotes: repaired
    "<answer>Paris</answer>\n<n>3</n>",  # markers, though JSON was asked for
    "<answer>\nParis\n<n> 3",  # markers without closing tags
])
def test_replies_are_parsed_robustly(reply):
    assert parse_reply(reply, node(), TYPES) == {"answer": "Paris", "n": 3}


def test_markers_first_then_json_fallback():
    n = node(format="markers")
    assert parse_reply('<answer>{"x": 1}</answer><n>2</n>', n, TYPES) == {"answer": '{"x": 1}', "n": 2}
    assert parse_reply('{"answer": "B", "n": 5}', n, TYPES) == {"answer": "B", "n": 5}


@pytest.mark.parametrize("reply, match", [
    ("Paris, I think.", r"lacks output field\(s\) \['answer', 'n'\]"),
    ('{"answer": "Paris"}', r"lacks output field\(s\) \['n'\]"),
    ('{"answer": "Paris", "n": "three"}', "field 'n': cannot read 'three' as int"),
    ("", "lacks output field"),
    (None, "lacks output field"),
])
def test_unreadable_replies_raise_parse_error(reply, match):
    with pytest.raises(ParseError, match=match):
        parse_reply(reply, node(), TYPES)


def test_coerce_types():
    assert coerce("- a\n- b\n\n3. c", "list[str]", "x") == ["a", "b", "c"]
    assert coerce('["a", 2]', "list[str]", "x") == ["a", "2"]
    assert coerce("yes", "bool", "x") is True and coerce("False", "bool", "x") is False
    assert coerce(" 2.5 ", "float", "x") == 2.5 and coerce(["a"], "str", "x") == '["a"]'
    assert coerce('{"k": 1}', "json", "x") == {"k": 1}
    for bad, t in (("maybe", "bool"), (True, "int"), ("1.5", "int"), (False, "float")):
        with pytest.raises(ParseError):
            coerce(bad, t, "x")


def test_predict_passes_node_config_and_records_the_call():
    seen = {}

    def reply(messages, tools):
        seen["messages"] = messages
        return '{"answer": "Paris", "n": 1}'

    llm = ScriptedLLM([reply])
    out, call = predict(node(temperature=0.3, max_tokens=50), {"question": "q", "passages": ["p"]}, llm, TYPES,
                        sample=2)
    assert out == {"answer": "Paris", "n": 1}
    assert call.reply == '{"answer": "Paris", "n": 1}' and call.input_tokens == 10 and call.error is None
    assert call.messages == seen["messages"]


def test_parse_failure_keeps_the_call_record():
    llm = ScriptedLLM(["no idea"])
    with pytest.raises(ParseError) as e:
        predict(node(), {"question": "q", "passages": []}, llm, TYPES)
    call = e.value.llm_call  # type: ignore[attr-defined]
    assert call.reply == "no idea" and "lacks output field" in call.error
