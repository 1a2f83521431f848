"""The offline text layer: Punkt-like sentence splits, Treebank-like tokens, stop words, emoji, syllables."""

from __future__ import annotations

import pytest

from triforge.maestro.benchmarks.ifbench.sentences import split_sentences
from triforge.maestro.benchmarks.ifbench.text import (
    STOPWORDS,
    count_stopwords,
    count_words,
    edge_tokens,
    heuristic_syllables,
    is_emoji,
    syllable_count,
    word_tokenize,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello there. How are you? Fine!", ["Hello there.", "How are you?", "Fine!"]),
        ("Dr. Smith met Mr. Jones. They left.", ["Dr. Smith met Mr. Jones.", "They left."]),
        ("The U.S. Army is big. It grew.", ["The U.S. Army is big.", "It grew."]),
        (
            "Title line\n\nFirst sentence. Second",
            ["Title line\n\nFirst sentence.", "Second"],
        ),  # no split on newline
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),  # quote moves back
        ("Really?! Yes.", ["Really?!", "Yes."]),
        ("It costs 3.50 dollars. Cheap.", ["It costs 3.50 dollars.", "Cheap."]),
        ("In 2023. The end.", ["In 2023.", "The end."]),
        ("Founded in 1999. by them", ["Founded in 1999. by them"]),  # number, then lower case: no break
        ("1. Item one\n2. Item two", ["1.", "Item one\n2.", "Item two"]),
        ("Wait... what?", ["Wait... what?"]),
        ("", []),
        ("   ", []),
    ],
)
def test_sentence_splits(text, expected):
    assert split_sentences(text) == expected


def test_word_tokenize_treebank_conventions():
    assert word_tokenize("I don't know, they said.") == ["I", "do", "n't", "know", ",", "they", "said", "."]
    assert word_tokenize('She said "hi" (twice)!') == [
        "She",
        "said",
        "``",
        "hi",
        "''",
        "(",
        "twice",
        ")",
        "!",
    ]
    assert word_tokenize("It's cannot-do. Next one.") == [
        "It",
        "'s",
        "can",
        "not",
        "-do",
        ".",
        "Next",
        "one",
        ".",
    ]
    assert word_tokenize("“Smart” quotes, don’t they?") == [
        "“",
        "Smart",
        "”",
        "quotes",
        ",",
        "don",
        "’",
        "t",
        "they",
        "?",
    ]
    assert edge_tokens("One two three. Four five six.", 2) == (["One", "two"], ["six", "."])


def test_word_counts_and_stop_words():
    assert count_words("Hello, world! It's 2024.") == 5  # Hello world It s 2024
    assert {"the", "and", "s", "t", "don"} <= STOPWORDS and len(STOPWORDS) >= 150
    assert count_stopwords("The cat and the hat") == 3


def test_emoji_table():
    assert is_emoji("😀") and is_emoji("🐱") and is_emoji("❤") and is_emoji("©")
    assert not is_emoji("a") and not is_emoji("→") and not is_emoji("😀😀") and not is_emoji("")


def test_syllables():
    assert [syllable_count(w) for w in ("cat", "apple", "banana")] == [1, 2, 3]
    assert [heuristic_syllables(w) for w in ("cat", "apple", "make", "banana", "rhythm", "2024")] == [
        1,
        2,
        1,
        3,
        1,
        0,
    ]
