"""The typed edit library: valid edits apply and type-check; invalid ones are refused with the reason."""

from __future__ import annotations

import pytest

from triforge.maestro.interpreter import run_program
from triforge.maestro.optimize.edits import apply_edits
from triforge.maestro.optimize.reflect import ReplyError, parse_edits
from triforge.maestro.optimize.typecheck import EditError, graph_distance, typecheck
from triforge.maestro.programs import seed_program
from triforge.maestro.sim_bed import TOOLS, VALIDATORS, SimLM, bridge_task, calculator_task, state_field_task

LIB = set(TOOLS) | set(VALIDATORS)
CALC = "triforge.maestro.sim_bed:calculator"


def test_every_seed_program_passes_the_type_check():
    for name in ("hotpotqa", "ifbench", "cpbench"):
        typecheck(seed_program(name))


@pytest.mark.parametrize("edits", [
    [{"op": "insert_before", "target": "create_query", "node": {"name": "extract", "inputs": ["question", "passages_1"],
                                                                "outputs": ["entity"]}}],
    [{"op": "insert_after", "target": "answer", "node": {"name": "polish", "inputs": ["answer"], "outputs": ["answer"]}}],
    [{"op": "remove", "target": "hop2"}, {"op": "remove", "target": "create_query"},
     {"op": "rewire", "src": "hop1", "dst": "answer", "to": "answer"}],
    [{"op": "add_validator", "target": "answer", "fn": "triforge.maestro.sim_bed:check_uppercase",
      "inputs": {"answer": "answer"}}],
    [{"op": "add_tool", "target": "answer", "node": {"name": "calc", "fn": CALC, "inputs": {"text": "question"},
                                                     "outputs": ["result"]}}],
    [{"op": "add_retrieval", "target": "answer", "node": {"name": "hop3", "query": "query", "k": 2}}],
    [{"op": "split", "target": "answer", "first": "plan", "field": "plan", "first_instruction": "Plan."}],
    [{"op": "add_state_field", "writer": "create_query", "field": "hint", "readers": ["answer"]}],
], ids=["insert_before", "insert_after", "remove+rewire", "validator", "tool", "retrieval", "split", "state_field"])
def test_valid_edits_apply_type_check_and_run(edits):
    parent = bridge_task().program
    if edits[0]["op"] == "remove":  # answer reads passages_2, which hop2 wrote: that is caught below
        with pytest.raises(EditError, match="passages_2"):
            apply_edits(parent, edits, LIB)
        return
    child = apply_edits(parent, edits, LIB)
    assert child.hash != parent.hash and parent == bridge_task().program  # the parent is not touched
    run = run_program(child, bridge_task().examples[0].inputs, SimLM(), retrievers=bridge_task().retrievers())
    assert run.error is None, run.error
    assert graph_distance(parent, child) >= 1


def test_unchanged_modules_keep_their_config():
    parent = state_field_task().program
    parent.node("answer").demos = [{"notes": "n", "answer": "a"}]
    child = apply_edits(parent, [{"op": "add_state_field", "writer": "summarize", "field": "unit",
                                  "readers": ["answer"]}], LIB)
    assert child.node("answer").demos == parent.node("answer").demos
    assert child.node("answer").instruction == parent.node("answer").instruction
    assert child.node("answer").inputs == {"notes": "notes", "unit": "unit"}


@pytest.mark.parametrize("edits,reason", [
    ([{"op": "remove", "target": "answr"}], "no node 'answr'"),
    ([{"op": "explode", "target": "answer"}], "unknown op"),
    ([{"op": "insert_before", "target": "answer", "node": {"name": "hop1", "outputs": ["x"]}}], "already exists"),
    ([{"op": "add_tool", "target": "answer", "node": {"name": "sh", "fn": "os:system", "inputs": {"command": "question"},
                                                      "outputs": ["result"]}}], "not in the tool library"),
    ([{"op": "add_tool", "target": "answer", "node": {"name": "calc", "fn": CALC, "inputs": {"expression": "question"},
                                                      "outputs": ["result"]}}], "takes no parameter"),
    ([{"op": "insert_before", "target": "hop1", "node": {"name": "early", "inputs": ["passages_2"], "outputs": ["x"]}}],
     "may read 'passages_2' before"),
    ([{"op": "add_state_field", "writer": "create_query", "field": "z", "type": "tensor"}], "unknown type"),
    ([{"op": "add_validator", "target": "answer", "fn": "triforge.maestro.sim_bed:check_uppercase",
       "max_attempts": 50}], "bounded retry"),
    ([{"op": "rewire", "src": "hop1", "dst": "answer", "to": "answer"}], "no edge hop1->answer"),
    ([], "no edit"),
])
def test_invalid_edits_are_refused_with_the_reason(edits, reason):
    with pytest.raises(EditError, match=reason):
        apply_edits(bridge_task().program, edits, LIB)


def test_replies_that_are_not_edits_are_refused():
    for bad in ("Add a checker, I think.", "{\"rationale\": \"x\"}", "[1, 2]"):
        with pytest.raises(ReplyError):
            parse_edits(bad)
    edits, why = parse_edits('Sure: {"rationale": "r", "edits": [{"op": "remove", "target": "x"}]}')
    assert edits == [{"op": "remove", "target": "x"}] and why == "r"


def test_graph_distance_counts_structure_not_instructions():
    p = calculator_task().program
    q = p.copy()
    q.node("answer").instruction = "Something else."
    assert graph_distance(p, q) == 0
    r = apply_edits(p, [{"op": "add_tool", "target": "answer", "node": {"name": "calc", "fn": CALC,
                                                                          "inputs": {"text": "question"},
                                                                          "outputs": ["result"]}}], LIB)
    assert graph_distance(p, r) == 3  # a node, an edge, a new input port of answer
