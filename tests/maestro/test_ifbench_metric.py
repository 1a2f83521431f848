"""Strict vs loose scoring, the metric's feedback, the loader, splits and the seed program."""

from __future__ import annotations

import json

import pytest

from triforge.core.errors import UserError
from triforge.maestro.benchmarks.base import Example, MetricResult
from triforge.maestro.benchmarks.ifbench import (
    CHECKERS,
    IFBenchExample,
    PromptIndex,
    ifbench_metric,
    load_ifbench,
    load_split,
    loose_variants,
    score_response,
    split_ifbench,
)
from triforge.maestro.benchmarks.ifbench.checkers import DESCRIPTIONS, describe


def make(ids, kwargs, prompt="p") -> IFBenchExample:
    return IFBenchExample(
        id="k", inputs={"prompt": prompt}, gold={"instruction_id_list": ids, "kwargs": kwargs}
    )


def test_loose_variants_are_the_eight_official_relaxations():
    v = loose_variants("Sure!\n**Body** text\nHope this helps")
    assert v[0] == "Sure!\n**Body** text\nHope this helps"
    assert "**Body** text\nHope this helps" in v  # first line removed
    assert "Sure!\n**Body** text" in v  # last line removed
    assert "**Body** text" in v and "Body text" in v  # both removed, and without *
    assert len(v) == 8


def test_loose_passes_when_a_preamble_breaks_strict():
    ex = make(["format:options"], [{"options": "yes/no/maybe"}])
    response = "Here is my answer:\nyes"
    assert score_response(ex, response, "strict") == [False]
    assert score_response(ex, response, "loose") == [True]


def test_loose_removes_markdown_stars():
    ex2 = make(["words:prime_lengths"], [{}])
    assert score_response(ex2, "**We** go", "strict") == [True]  # * is punctuation, removed anyway
    ex3 = make(["format:sub-bullets"], [{}])
    assert score_response(ex3, "**Bold** intro\n* item\n  - sub", "strict") == [False]
    assert score_response(ex3, "**Bold** intro\n* item\n  - sub", "loose") == [True]


def test_empty_response_fails_every_instruction_in_both_modes():
    ex = make(["format:sub-bullets", "ratio:sentence_type"], [{}, {}])
    for mode in ("strict", "loose"):
        assert score_response(ex, "", mode) == [False, False]
        assert score_response(ex, "   \n ", mode) == [False, False]


def test_bad_mode_is_rejected():
    with pytest.raises(ValueError):
        score_response(make(["format:newline"], [{}]), "x", "lenient")


def test_metric_scores_fraction_and_names_failed_constraints():
    ex = make(["count:numbers", "format:no_whitespace"], [{"N": 2.0}, {}])
    res = ifbench_metric(ex, "one 1 and 2")
    assert isinstance(res, MetricResult)
    assert res.score == 0.5
    assert "1 of 2 constraints failed" in res.feedback
    assert "Do not use any whitespace" in res.feedback and "format:no_whitespace" in res.feedback
    assert "numbers" not in res.feedback  # the satisfied one is not listed as failed
    assert res.details["follow_instruction_list"] == [True, False]
    full = ifbench_metric(ex, "x y")
    assert full.score == 0.0 and "N=2" in full.feedback and "Include exactly 2 numbers" in full.feedback
    ok = ifbench_metric(make(["format:no_whitespace"], [{}]), "ok")
    assert ok.score == 1.0 and "All constraints are satisfied (1 of 1" in ok.feedback


def test_feedback_says_what_the_response_has_where_a_count_helps():
    ex = make(
        ["count:word_count_range", "words:repeats"], [{"min_words": 10, "max_words": 12}, {"small_n": 1}]
    )
    res = ifbench_metric(ex, "one two two")
    assert "(found 3 words)" in res.feedback
    assert "most repeated word: 'two' x2" in res.feedback


def test_every_checker_has_a_plain_description():
    assert set(DESCRIPTIONS) == set(CHECKERS)
    assert describe("words:repeats", {"small_n": 3.0}) == "Do not repeat any word more than 3 times."


def test_metric_accepts_a_plain_example():
    ex = Example(
        id="x",
        inputs={"prompt": "p"},
        gold={"instruction_id_list": ["count:numbers"], "kwargs": [{"N": 1, "z": None}]},
    )
    assert ifbench_metric(ex, "just 1 number").score == 1.0


def test_base_dataclasses_shape():
    e = Example(id="1", inputs={"q": "x"})
    assert e.gold == {}
    assert len({e, Example(id="1", inputs={"q": "x"}), Example(id="2", inputs={})}) == 2  # hashable by id
    m = MetricResult(score=1.0, feedback="ok")
    assert m.details == {}


def _write(tmp_path, rows):
    p = tmp_path / "IFBench_test.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def test_loader_drops_null_kwargs_and_reads_from_env(tmp_path, monkeypatch):
    rows = [
        {
            "key": i,
            "prompt": f"Prompt {i}",
            "instruction_id_list": ["count:numbers"],
            "kwargs": [{"N": 2.0, "x": None}],
        }
        for i in range(20)
    ]
    _write(tmp_path, rows)
    monkeypatch.setenv("TRIFORGE_IFBENCH", str(tmp_path))
    exs = load_ifbench()
    assert len(exs) == 20 and exs[0].kwargs == [{"N": 2.0}] and exs[0].prompt == "Prompt 0"
    splits = split_ifbench(exs, seed=3)
    assert [len(splits[s]) for s in ("train", "val", "test")] == [10, 5, 5]
    assert split_ifbench(exs, seed=3) == splits  # deterministic
    assert {e.id for s in splits.values() for e in s} == {str(i) for i in range(20)}
    assert load_split("val", tmp_path, seed=3) == splits["val"]
    with pytest.raises(UserError):
        load_split("dev", tmp_path)


def test_loader_errors_are_user_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIFORGE_IFBENCH", str(tmp_path / "nowhere"))
    with pytest.raises(UserError, match="not found"):
        load_ifbench()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n', encoding="utf-8")
    with pytest.raises(UserError, match=":1:"):
        load_ifbench(bad)


def test_prompt_index_tolerates_whitespace_and_damaged_quotes():
    ex = make(["format:newline"], [{}], prompt='Columns are ["ID", "City"].')
    index = PromptIndex([ex])
    assert index.lookup('Columns are ["ID", "City"].') is ex
    assert index.lookup('  Columns are ["ID", "City"]. ') is ex
    assert index.lookup('junk\t12\tColumns are [ID", "City"].') is ex
    assert index.lookup("Something else") is None

