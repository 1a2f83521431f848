"""HotpotQA: official normalization and scores, loaders for both file shapes, the mini set, BM25, feedback."""

from __future__ import annotations

import json
import re

import pytest

from triforge.core.errors import UserError
from triforge.maestro.bench import open_benchmark
from triforge.maestro.benchmarks.hotpotqa import (
    exact_match,
    f1_score,
    load_hotpotqa,
    load_hotpotqa_corpus,
    normalize_answer,
    split_examples,
)
from triforge.maestro.bm25 import BM25Retriever, load_corpus
from triforge.maestro.evaluate import evaluate
from triforge.maestro.programs.hotpotqa import hotpotqa_seed
from triforge.testing.scripted import ScriptedLLM


@pytest.mark.parametrize("text, norm", [
    ("The  Eiffel Tower!", "eiffel tower"),
    ("an apple, a pear", "apple pear"),
    ("Theodore", "theodore"),  # 'the' only as a word
    ("2,400", "2400"),
    ("U.S.A.", "usa"),
])
def test_normalize_answer(text, norm):
    assert normalize_answer(text) == norm


def test_exact_match_and_f1():
    assert exact_match("the Varnell Tower.", "Varnell Tower")
    assert not exact_match("Varnell", "Varnell Tower")
    f1, p, r = f1_score("Varnell", "Varnell Tower")
    assert (p, r) == (1.0, 0.5) and f1 == pytest.approx(2 / 3)
    assert f1_score("yes", "no")[0] == 0 and f1_score("yes it is", "yes")[0] == 0  # yes/no must match exactly
    assert f1_score("Yes.", "yes")[0] == 1.0
    assert f1_score("x b b", "b b c")[0] == pytest.approx(2 / 3)  # token multiset overlap
    assert f1_score("a b b", "b b c")[0] == pytest.approx(0.8)  # "a" is an article, dropped


def test_mini_set_is_complete_and_consistent():
    examples, ctx = load_hotpotqa("mini")
    corpus = load_hotpotqa_corpus("mini")
    titles = {p.title for p in corpus}
    assert len(examples) == 20 and len(corpus) == 60 and len(titles) == 60 and ctx == []
    types = [e.gold["type"] for e in examples]
    assert types.count("bridge") >= 8 and types.count("comparison") >= 6
    for e in examples:
        assert len(e.gold["titles"]) == 2 and set(e.gold["titles"]) <= titles, e.id
        assert e.gold["answer"] and e.inputs["question"].endswith("?")
    # every answer is stated in one of its gold documents
    text = {p.title: normalize_answer(p.text) for p in corpus}
    for e in examples:
        if e.gold["answer"] not in ("yes", "no"):
            assert any(normalize_answer(e.gold["answer"]) in text[t] for t in e.gold["titles"]), e.id


def official_record(i: int) -> dict:
    return {"_id": f"id{i}", "question": f"Q{i}?", "answer": f"A{i}", "type": "bridge", "level": "hard",
            "supporting_facts": [["Alpha", 0], ["Beta", 1], ["Alpha", 2]],
            "context": [["Alpha", ["Alpha is one. ", "It rhymes."]], ["Beta", ["Beta is two."]]]}


def hf_record(i: int) -> dict:
    return {"id": f"id{i}", "question": f"Q{i}?", "answer": f"A{i}", "type": "comparison", "level": "easy",
            "supporting_facts": {"title": ["Beta", "Gamma"], "sent_id": [0, 0]},
            "context": {"title": ["Beta", "Gamma"], "sentences": [["Beta is two."], ["Gamma is three."]]}}


def test_official_json_and_hugging_face_jsonl(tmp_path):
    official = tmp_path / "hotpot_dev_distractor_v1.json"
    official.write_text(json.dumps([official_record(i) for i in range(3)]))
    hf = tmp_path / "hotpotqa.jsonl"
    hf.write_text("\n".join(json.dumps(hf_record(i)) for i in range(2)) + "\n")
    exs, ctx = load_hotpotqa(official)
    assert [e.id for e in exs] == ["id0", "id1", "id2"]
    assert exs[0].gold["titles"] == ["Alpha", "Beta"] and exs[0].inputs == {"question": "Q0?"}
    assert [(p.title, p.text) for p in ctx] == [("Alpha", "Alpha is one. It rhymes."), ("Beta", "Beta is two.")]
    exs, ctx = load_hotpotqa(hf)
    assert exs[1].gold == {"answer": "A1", "titles": ["Beta", "Gamma"], "type": "comparison", "level": "easy"}
    assert [p.title for p in ctx] == ["Beta", "Gamma"]
    # the context paragraphs are the corpus when no abstracts file is given
    bench = open_benchmark("hotpotqa", data=str(hf))
    assert bench.retrievers()["default"].search("Gamma three", 1) == [("Gamma", "Gamma is three.")]


@pytest.mark.parametrize("content, match", [
    ("{not json", "not a JSON line"),
    ('[{"_id": "1", "question": "q"}]', "lacks 'answer'"),
    ('[{"question": "q", "answer": "a"}]', "needs '_id' or 'id'"),
])
def test_bad_files_fail_clearly(tmp_path, content, match):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(UserError, match=match):
        load_hotpotqa(p)
    with pytest.raises(UserError, match="parquet is not read"):
        (tmp_path / "x.parquet").write_bytes(b"PAR1")
        load_hotpotqa(tmp_path / "x.parquet")
    with pytest.raises(UserError, match="not found"):
        load_hotpotqa(tmp_path / "missing.json")


def test_splits_are_disjoint_deterministic_and_cover_everything():
    exs, _ = load_hotpotqa("mini")
    parts = {s: [e.id for e in split_examples(exs, s, seed=1)] for s in ("train", "val", "test")}
    assert sum(map(len, parts.values())) == 20 and len({i for p in parts.values() for i in p}) == 20
    assert parts == {s: [e.id for e in split_examples(exs, s, seed=1)] for s in parts}
    assert parts["train"] != [e.id for e in split_examples(exs, "train", seed=2)]
    with pytest.raises(UserError, match="unknown HotpotQA split"):
        split_examples(exs, "dev")


def test_bm25_finds_the_first_hop_document_for_every_question():
    r = BM25Retriever(load_hotpotqa_corpus("mini"))
    exs, _ = load_hotpotqa("mini")
    for e in exs:
        got = [t for t, _ in r.search(e.inputs["question"], 5)]
        assert e.gold["titles"][0] in got or e.gold["titles"][1] in got, e.id
    assert r.search("the of and", 3) == []


def test_corpus_file_errors(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"title": "A", "text": ["one ", "two"]}\n\n{"name": "B"}\n')
    with pytest.raises(UserError, match=r"c.jsonl:3: expected a JSON object with 'title' and 'text'"):
        load_corpus(p)
    p.write_text('{"title": "A", "text": ["one ", "two"]}\n')
    assert load_corpus(p)[0].text == "one two"


def scripted_agent(answer: str, second_query: str):
    """Replies for the seed program's four llm nodes, checking what each is given."""
    def summarize(messages, tools):
        assert "<passages>\n[1] " in messages[-1]["content"]
        return json.dumps({"summary_1": "s1", "summary_2": "s2"})

    def query(messages, tools):
        assert "<summary_1>\ns1\n</summary_1>" in messages[-1]["content"]
        return json.dumps({"query": second_query})

    return [summarize, query, summarize, json.dumps({"answer": answer})]


def test_seed_program_end_to_end_scores_and_feedback():
    bench = open_benchmark("hotpotqa")
    ex = next(e for e in bench.examples("all") if e.id == "mini-02")  # founder of the quartet -> cello
    prog = hotpotqa_seed(k=1)
    right = evaluate(prog, [ex], bench.metric, ScriptedLLM(scripted_agent("Cello", "Rafael Ondiveros cellist")),
                     retrievers=bench.retrievers()).results[0]
    assert right.score == 1.0 and right.details["missing_titles"] == []
    assert right.feedback.startswith("Correct") and [t["node"] for t in right.trace] == [
        "hop1", "summarize_1", "create_query_2", "hop2", "summarize_2", "answer"]
    wrong = evaluate(prog, [ex], bench.metric, ScriptedLLM(scripted_agent("violin", "jazz albums")),
                     retrievers=bench.retrievers()).results[0]
    assert wrong.score == 0.0
    assert "gold answer 'cello'" in wrong.feedback
    assert re.search(r"Gold documents not yet retrieved: 'Rafael Ondiveros'\.", wrong.feedback)
    assert wrong.details["retrieved_titles"][0] == "Blue Tamarind Quartet"
