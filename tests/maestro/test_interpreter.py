"""The interpreter on one example: traces, routing, bounded cycles, and failures recorded, never raised."""

from __future__ import annotations

import json

import pytest

from triforge.core import context
from triforge.core.budget import Budget, BudgetLimits
from triforge.core.errors import BudgetExceeded
from triforge.core.trace import Tracer, read_spans
from triforge.maestro.interpreter import Interpreter, run_program
from triforge.maestro.nodes import Cond
from triforge.maestro.program import ProgramBuilder
from triforge.testing.scripted import ScriptedLLM


def qa_program(**llm_kw):
    b = ProgramBuilder("qa", inputs=["question"], outputs=["answer"])
    b.code("loud", "maestro_fns:shout", inputs={"text": "question"}, outputs={"text": "loud"})
    b.llm("answer", inputs={"question": "loud"}, outputs=["answer"], instruction="Answer.", **llm_kw)
    return b.build()


def test_linear_run_outputs_and_trace():
    llm = ScriptedLLM(['{"answer": "Paris"}'])
    run = run_program(qa_program(), {"question": "where?"}, llm)
    assert run.ok and run.outputs == {"answer": "Paris"}
    assert run.state == {"question": "where?", "loud": "WHERE?!", "answer": "Paris"}
    code, ans = run.trace
    assert (code.node, code.kind, code.inputs, code.outputs) == ("loud", "code", {"text": "where?"},
                                                                 {"text": "WHERE?!"})
    assert ans.inputs == {"question": "WHERE?!"} and len(ans.llm_calls) == 1
    assert "<question>\nWHERE?!\n</question>" in ans.llm_calls[0].messages[-1]["content"]
    assert ans.llm_calls[0].reply == '{"answer": "Paris"}'
    llm.assert_done()


def test_planted_parse_failure_is_recorded_not_raised():
    run = run_program(qa_program(), {"question": "q"}, ScriptedLLM(["I refuse to use JSON."]))
    assert not run.ok and run.error_kind == "parse" and run.outputs == {}
    assert run.error.startswith("answer: reply lacks output field(s) ['answer']")
    rec = run.trace[-1]
    assert rec.error == run.error and rec.llm_calls[0].reply == "I refuse to use JSON."


@pytest.mark.parametrize("fn, match", [
    ("maestro_fns:boom", "maestro_fns:boom raised RuntimeError: planted failure"),
    ("maestro_fns:bad_type", "expected str"),
    ("maestro_fns:nope", "cannot import 'maestro_fns:nope'"),
    ("no_such_module_xyz:f", "cannot import"),
])
def test_node_failures_are_recorded(fn, match):
    b = ProgramBuilder("p", inputs=["q"], outputs=["out"], types={"out": "str"})
    b.code("c", fn, inputs={"text": "q"}, outputs={"text": "out"})
    run = run_program(b.build(), {"q": "x"}, ScriptedLLM([]))
    assert run.error_kind == "node" and match in run.error


def test_missing_input_is_an_error_on_the_example():
    run = run_program(qa_program(), {"other": 1}, ScriptedLLM([]))
    assert run.error_kind == "input" and "['question']" in run.error


def test_router_takes_the_first_edge_whose_condition_holds():
    b = ProgramBuilder("r", inputs=["text"], outputs=["answer"], types={"n": "int"})
    b.code("count", "maestro_fns:split_words", inputs=["text"], outputs={"words": "words", "count": "n"})
    b.field("words", "list[str]")
    b.router("route")
    b.llm("long", inputs=["text"], outputs=["answer"], after=None)
    b.llm("short", inputs=["text"], outputs=["answer"], after=None)
    b.edge("route", "long", Cond("n", "gt", 3)).edge("route", "short")
    prog = b.build()
    ex = Interpreter(prog, ScriptedLLM(['{"answer": "L"}', '{"answer": "S"}']))
    long_run, short_run = ex.run({"text": "a b c d e"}), ex.run({"text": "a b"})
    assert [t.node for t in long_run.trace] == ["count", "route", "long"] and long_run.outputs["answer"] == "L"
    assert [t.node for t in short_run.trace] == ["count", "route", "short"] and short_run.outputs["answer"] == "S"


def validate_program(max_attempts=3, max_visits=3):
    b = ProgramBuilder("v", inputs=["question"], outputs=["answer"])
    b.llm("answer", inputs=["question", "why"], outputs=["answer"], max_visits=max_visits)
    b.field("why", "str")
    b.code("init", "maestro_fns:shout", inputs={"text": "question"}, outputs={"text": "why"}, after=None)
    b.validate("check", "maestro_fns:has_marker", inputs=["answer"], outputs={"ok": "ok", "message": "why"},
               retry="answer", max_attempts=max_attempts, after="answer")
    prog = b.build()
    prog.entry = "init"
    prog.edges.append(type(prog.edges[0])("init", "answer"))
    prog.check()
    return prog


def test_validate_routes_back_until_the_check_passes():
    llm = ScriptedLLM(['{"answer": "nope"}', '{"answer": "OK now"}'])
    run = run_program(validate_program(), {"question": "q"}, llm)
    assert run.ok and run.outputs["answer"] == "OK now" and run.state["ok"] is True
    assert [t.node for t in run.trace] == ["init", "answer", "check", "answer", "check"]
    second_prompt = run.trace[3].llm_calls[0].messages[-1]["content"]
    assert "the answer must contain 'OK'" in second_prompt  # the check's message reached the retry
    llm.assert_done()


def test_validate_gives_up_after_max_attempts_and_goes_on():
    llm = ScriptedLLM(['{"answer": "no"}'] * 3)
    run = run_program(validate_program(max_attempts=3), {"question": "q"}, llm)
    assert run.ok and run.state["ok"] is False and run.outputs["answer"] == "no"
    assert [t.node for t in run.trace].count("answer") == 3
    llm.assert_done()


def test_cycles_are_bounded_by_max_visits():
    llm = ScriptedLLM(['{"answer": "no"}'] * 10)
    run = run_program(validate_program(max_attempts=10, max_visits=2), {"question": "q"}, llm)
    assert run.error_kind == "loop" and "max_visits=2" in run.error
    assert [t.node for t in run.trace].count("answer") == 3  # two runs, then the third is refused
    assert llm.remaining == 8


def test_cycles_are_bounded_by_max_steps():
    b = ProgramBuilder("loop", inputs=["q"], outputs=["q"], max_steps=5)
    b.router("a", max_visits=100)
    b.router("b", max_visits=100)
    b.edge("b", "a")
    run = run_program(b.build(), {"q": "x"}, ScriptedLLM([]))
    assert run.error_kind == "loop" and "max_steps=5" in run.error and len(run.trace) == 6


def test_tool_node_gets_its_model_and_sample():
    b = ProgramBuilder("agent", inputs=["prompt"], outputs=["reply"])
    b.tool("agent", "maestro_fns:with_llm", inputs=["prompt"], outputs=["reply", "sample_seen"], model="big")
    default, big = ScriptedLLM([]), ScriptedLLM(["from big"])
    run = run_program(b.build(), {"prompt": "hi"}, {None: default, "big": big}, sample=4)
    assert run.outputs == {"reply": "from big"} and run.state["sample_seen"] == "4"
    assert big.requests[0]["messages"] == [{"role": "user", "content": "hi"}]


def test_unknown_model_alias_is_recorded():
    run = run_program(qa_program(model="huge"), {"question": "q"}, {None: ScriptedLLM([])})
    assert run.error_kind == "node" and "'huge' is not available" in run.error


def test_budget_exhaustion_stops_the_caller():
    with context.use(budget=Budget(BudgetLimits(max_calls=0))), pytest.raises(BudgetExceeded):
        run_program(qa_program(), {"question": "q"}, ScriptedLLM(['{"answer": "x"}']))


def test_nodes_become_spans_when_a_tracer_is_installed(tmp_path):
    with context.use(tracer=Tracer(tmp_path)):
        run_program(qa_program(), {"question": "q"}, ScriptedLLM(['{"answer": "x"}']))
    spans = read_spans(tmp_path)
    names = [s["name"] for s in spans]
    assert "node loud" in names and "node answer" in names and any(s["kind"] == "llm" for s in spans)
    llm_span = next(s for s in spans if s["kind"] == "llm")
    node_span = next(s for s in spans if s["name"] == "node answer")
    assert llm_span["parent_id"] == node_span["span_id"]
    json.dumps(spans)
