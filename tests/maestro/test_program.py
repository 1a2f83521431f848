"""Programs as data: builder, checks, JSON/TOML round trips, content hash, rendering."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triforge.maestro.nodes import Cond, LLMNode
from triforge.maestro.program import Program, ProgramBuilder, ProgramError
from triforge.maestro.programs import SEED_NAMES, load_program, seed_program
from triforge.maestro.render import to_mermaid, to_text


def every_kind() -> Program:
    b = ProgramBuilder("all_kinds", inputs=["question"], outputs=["answer"], types={"n": "int"})
    b.retrieve("search", query="question", passages="passages", titles="titles", k=3)
    b.code("count", "maestro_fns:split_words", inputs={"text": "question"}, outputs={"words": "words",
                                                                                      "count": "n"})
    b.field("words", "list[str]")
    b.router("route")
    b.llm("long", inputs=["question", "passages"], outputs=["answer"], instruction="Answer: long.",
          after=None, demos=[{"question": "q\u00e9?", "passages": ["p1"], "answer": 'a "quoted"\nline\x7f'}],
          temperature=0.2, max_tokens=64, reasoning=True, model="small", descriptions={"answer": "short"})
    b.llm("short", inputs=["question"], outputs=["answer"], instruction="Answer: short.", after=None,
          format="markers")
    b.edge("route", "long", Cond("n", "gt", 4)).edge("route", "short")
    b.validate("check", "maestro_fns:has_marker", inputs=["answer"], outputs={"ok": "ok", "message": "why"},
               retry="long", after="long", args={"marker": "OK"}, max_attempts=2)
    b.tool("shout", "maestro_fns:shout", inputs={"text": "answer"}, outputs={"text": "loud"}, after="check")
    return b.build()


def test_builder_links_nodes_in_order_and_infers_types():
    p = every_kind()
    assert p.entry == "search"
    assert [(e.src, e.dst) for e in p.edges][:2] == [("search", "count"), ("count", "route")]
    assert p.state["passages"] == "list[str]" and p.state["ok"] == "bool" and p.state["n"] == "int"
    assert p.successors("route")[0].when == Cond("n", "gt", 4)


@pytest.mark.parametrize("name", SEED_NAMES)
def test_seeds_round_trip_json_and_toml_exactly(name, tmp_path):
    p = seed_program(name)
    for suffix in (".json", ".toml"):
        path = p.save(tmp_path / f"p{suffix}")
        q = Program.load(path)
        assert q == p and q.hash == p.hash
        assert load_program(str(path)) == p


def test_every_kind_round_trips_with_awkward_text(tmp_path):
    p = every_kind()
    assert Program.from_toml(p.to_toml()) == p
    assert Program.from_json(p.to_json()) == p
    again = Program.from_toml(Program.from_json(p.to_json()).to_toml())
    assert again.hash == p.hash


text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(instruction=text, demo_value=text, key=st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True))
def test_toml_round_trip_any_text(instruction, demo_value, key):
    p = seed_program("ifbench")
    node = p.node("answer")
    assert isinstance(node, LLMNode)
    node.instruction = instruction
    node.demos = [{"query": demo_value, "draft_response": key}]
    node.descriptions = {key: demo_value}
    assert Program.from_toml(p.to_toml()) == p


def test_hash_is_stable_and_content_based():
    a, b = seed_program("hotpotqa"), seed_program("hotpotqa")
    assert a.hash == b.hash and len(a.hash) == 16
    node = b.node("answer")
    assert isinstance(node, LLMNode)
    node.instruction += " Be brief."
    assert b.hash != a.hash
    # key order in the file does not matter, content does
    d = json.loads(a.to_json())
    reordered = dict(reversed(list(d.items())))
    assert Program.from_dict(reordered).hash == a.hash
    tiny = ProgramBuilder("tiny", inputs=["q"], outputs=["a"])
    tiny.llm("ans", inputs=["q"], outputs=["a"], instruction="Answer.")
    assert tiny.build().hash == "7de4673416a8bc41"  # golden: changes only when the format changes


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(entry="nowhere"), "entry 'nowhere' is not a node"),
    (lambda d: d["nodes"][1]["inputs"].update(passages="nope"), "reads 'nope'"),
    (lambda d: d["state"].update(answer="number"), "unknown type 'number'"),
    (lambda d: d["nodes"].append(dict(d["nodes"][0])), "duplicate node names"),
    (lambda d: d["edges"].append({"src": "hop1", "dst": "ghost"}), "'ghost' is not a node"),
    (lambda d: d["nodes"][0].update(kind="magic"), "unknown kind 'magic'"),
    (lambda d: d["nodes"][1].update(temprature=0.3), "unknown keys ['temprature']"),
    (lambda d: d.pop("outputs"), "missing the key 'outputs'"),
    (lambda d: d["edges"].append({"src": "hop1", "dst": "hop2", "when": {"field": "zzz"}}), "unknown field 'zzz'"),
    (lambda d: d["nodes"][0].update(max_visits=0), "max_visits must be at least 1"),
    (lambda d: d.update(nodes=[5]), "'nodes' is a list of tables"),
    (lambda d: d.update(nodes={"a": {}}), "'nodes' is a list of tables"),
    (lambda d: d.update(edges=["hop1 -> hop2"]), "'edges' is a list of tables"),
    (lambda d: d.update(name=["x"]), "'name' is a string"),
    (lambda d: d.update(max_steps="many"), "malformed program"),
    (lambda d: d["nodes"][0]["inputs"].clear() or d["nodes"][0].update(inputs=7), "malformed program"),
])
def test_malformed_programs_are_rejected_with_one_line(mutate, message):
    d = seed_program("hotpotqa").to_dict()
    mutate(d)
    with pytest.raises(ProgramError, match=message.replace("[", r"\[").replace("]", r"\]")) as e:
        Program.from_dict(d)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text", ["[]", '"a program"', "42", "null"])
def test_a_file_that_is_not_a_table_is_one_line(text):
    with pytest.raises(ProgramError, match="a program is a table of keys"):
        Program.from_json(text)


def test_bad_files_are_user_errors(tmp_path):
    (tmp_path / "p.toml").write_text("name = [")
    with pytest.raises(ProgramError, match="not valid TOML"):
        Program.load(tmp_path / "p.toml")
    with pytest.raises(ProgramError, match="not found"):
        Program.load(tmp_path / "missing.json")
    with pytest.raises(ProgramError, match="not a seed"):
        load_program("no-such-thing")


def test_program_from_python_factory():
    p = load_program("triforge.maestro.programs.hotpotqa:hotpotqa_seed")
    assert p == seed_program("hotpotqa")


def test_mermaid_and_text_show_every_node_edge_and_condition():
    p = every_kind()
    m = to_mermaid(p)
    assert m.startswith("flowchart TD")
    for n in p.nodes:
        assert f"n_{n.name}" in m and f"{n.name} ({n.kind})" in m
    assert '|"n > 4"|' in m and "-.->|\"fail\"| n_long" in m and "n_shout --> stop" in m
    t = to_text(p)
    assert p.hash in t and "route -> long  when n > 4" in t and "model=small T=0.2" in t and "1 demos" in t
