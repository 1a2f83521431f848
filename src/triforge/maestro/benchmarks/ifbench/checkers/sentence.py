"""Sentence-level instructions: alliteration growth, word-count increments, keyword placement."""

from __future__ import annotations

import re

from triforge.maestro.benchmarks.ifbench.checkers.registry import Kwargs, as_int, register
from triforge.maestro.benchmarks.ifbench.sentences import split_sentences
from triforge.maestro.benchmarks.ifbench.text import PUNCT, remove_punct


def _alliteration(sentence: str) -> int:
    """Words in runs of consecutive words sharing a first letter (a run of k words scores k)."""
    ws = [w.lower().lstrip(PUNCT + " ") for w in sentence.split()]
    ws = [w for w in ws if w]
    score, in_run = 0, False
    for a, b in zip(ws, ws[1:], strict=False):
        if a[0] == b[0]:
            score += 1 if in_run else 2
            in_run = True
        else:
            in_run = False
    return score


@register(
    "sentence:alliteration_increment",
    "Each sentence must have a longer run of alliterative words than the one before.",
)
def alliteration_increment(response: str, kw: Kwargs) -> bool:
    prev = -1
    for sentence in split_sentences(response):
        score = _alliteration(sentence)
        if score <= prev:
            return False
        prev = score
    return True


@register("sentence:increment", "Each sentence must have exactly {small_n} more words than the one before.")
def increment(response: str, kw: Kwargs) -> bool:
    step = as_int(kw, "small_n")
    counts = [len(remove_punct(s).split()) for s in split_sentences(response)]
    if not counts:
        return False
    return all(b == a + step for a, b in zip(counts, counts[1:], strict=False))


@register("sentence:keyword", 'Sentence number {N} must contain the word "{word}".')
def keyword(response: str, kw: Kwargs) -> bool:
    n = as_int(kw, "N")
    sents = split_sentences(response)
    if n < 1 or len(sents) < n:
        return False
    return re.search(rf"\b{re.escape(str(kw['word']))}\b", sents[n - 1], re.IGNORECASE) is not None
