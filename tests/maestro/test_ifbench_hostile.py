"""Hostile responses: empty, huge, non-ASCII, control characters. No checker may crash or hang."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triforge.maestro.benchmarks.ifbench import CHECKERS, IFBenchExample, ifbench_metric, score_response
from triforge.maestro.benchmarks.ifbench.sentences import split_sentences

KWARGS = {
    "count:word_count_range": {"min_words": 5, "max_words": 10},
    "count:unique_word_count": {"N": 5},
    "count:conjunctions": {"small_n": 2},
    "count:person_names": {"N": 2},
    "count:numbers": {"N": 2},
    "count:words_japanese": {"N": 3},
    "count:pronouns": {"N": 2},
    "count:keywords_multiple": {
        "keyword1": "a",
        "keyword2": "b",
        "keyword3": "c",
        "keyword4": "d",
        "keyword5": "e",
    },
    "format:list": {"sep": "-"},
    "format:options": {"options": "yes/no/maybe"},
    "ratio:overlap": {"reference_text": "the quick brown fox", "percentage": 20},
    "ratio:stop_words": {"percentage": 30},
    "repeat:repeat_change": {"prompt_to_repeat": "Write a poem."},
    "repeat:repeat_span": {"prompt_to_repeat": "Write a poem.", "n_start": 0, "n_end": 4},
    "sentence:increment": {"small_n": 1},
    "sentence:keyword": {"word": "fox", "N": 2},
    "words:keywords_specific_position": {"keyword": "fox", "n": 1, "m": 2},
    "words:repeats": {"small_n": 2},
    "words:words_position": {"keyword": "fox"},
}

ALL_IDS = sorted(CHECKERS)
EVERYTHING = IFBenchExample(
    id="all",
    inputs={"prompt": "p"},
    gold={"instruction_id_list": ALL_IDS, "kwargs": [KWARGS.get(i, {}) for i in ALL_IDS]},
)

HOSTILE = [
    "",
    " ",
    "\n\n\n",
    "😀" * 50,
    "日本語の文章です。次の文。",
    "Ünïcödé façade — naïve café… “quoted” ‘single’ «guillemets»",
    "\x00\x01\x02 control \u200b zero-width \ufeff bom",
    "(((((((((([[[[[{{{{{",
    "?!?!?!?!?!...!!!???",
    '"""' + "'" * 30,
    "*\n*\n*\n-\n-",
    "<i></i><em>",
    "1. 2. 3. A. B. C. e.g. i.e. U.S. Dr. Mr.",
]


@pytest.mark.parametrize("response", HOSTILE)
def test_every_checker_survives_hostile_text(response):
    for mode in ("strict", "loose"):
        verdicts = score_response(EVERYTHING, response, mode)
        assert len(verdicts) == len(ALL_IDS)
    if not response.strip():
        assert score_response(EVERYTHING, response, "loose") == [False] * len(ALL_IDS)


def test_huge_response_is_scored_quickly():
    big = ("The quick brown fox jumps over the lazy dog. Why? Because! " * 4000) + "\n* item\n  - sub" * 500
    assert len(big) > 200_000
    t0 = time.perf_counter()
    score_response(EVERYTHING, big, "loose")
    assert time.perf_counter() - t0 < 20


def test_metric_never_raises_and_handles_none():
    res = ifbench_metric(EVERYTHING, None)  # type: ignore[arg-type]
    assert res.score == 0.0 and "constraints failed" in res.feedback


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_random_text_never_crashes(text):
    res = ifbench_metric(EVERYTHING, text)
    assert 0.0 <= res.score <= 1.0 and res.feedback
    sents = split_sentences(text)
    assert all(s for s in sents)
    assert "".join("".join(s.split()) for s in sents) == "".join(text.split())  # no text lost
