"""Ratio instructions: stop words, sentence types, trigram overlap, equal-length sentences."""

from __future__ import annotations

from triforge.maestro.benchmarks.ifbench.checkers.registry import Kwargs, as_int, register
from triforge.maestro.benchmarks.ifbench.sentences import split_sentences
from triforge.maestro.benchmarks.ifbench.text import count_stopwords, count_words


def _endings(response: str) -> tuple[int, int, int]:
    sents = split_sentences(response)
    return (
        sum(s.endswith(".") for s in sents),
        sum(s.endswith("?") for s in sents),
        sum(s.endswith("!") for s in sents),
    )


@register("ratio:stop_words", "Stop words must be no more than {percentage}% of all words.")
def stop_words(response: str, kw: Kwargs) -> bool:
    total = count_words(response)
    if total == 0:
        return False
    return count_stopwords(response) / total * 100 <= as_int(kw, "percentage")


@register("ratio:sentence_type", "Keep a 2:1 ratio of declarative (.) to interrogative (?) sentences.")
def sentence_type(response: str, kw: Kwargs) -> bool:
    declarative, interrogative, _ = _endings(response)
    return declarative == 2 * interrogative


@register(
    "ratio:sentence_balance",
    "Use equally many declarative (.), interrogative (?) and exclamatory (!) sentences.",
)
def sentence_balance(response: str, kw: Kwargs) -> bool:
    declarative, interrogative, exclamatory = _endings(response)
    return declarative == interrogative == exclamatory


def _trigrams(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(len(text) - 2)}


@register(
    "ratio:overlap",
    "Keep a character-trigram overlap of {percentage}% (within 2 points) with the reference text.",
)
def overlap(response: str, kw: Kwargs) -> bool:
    mine = _trigrams(response)
    if not mine:
        return False
    ratio = len(mine & _trigrams(str(kw.get("reference_text") or ""))) / len(mine) * 100
    target = as_int(kw, "percentage")
    return target - 2 <= ratio <= target + 2


@register(
    "ratio:sentence_words",
    "Write exactly three sentences, all with the same number of characters, using different words.",
)
def sentence_words(response: str, kw: Kwargs) -> bool:
    sents = split_sentences(response)
    return len(sents) == 3 and len({len(s.strip()) for s in sents}) == 1
