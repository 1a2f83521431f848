"""What a response actually has, for the instructions where a number makes feedback actionable.

`explain(instruction_id, response, kwargs)` returns a short phrase ("found 132 words") or "".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from triforge.maestro.benchmarks.ifbench.checkers.count import CONJUNCTIONS, PERSON_NAMES, PRONOUNS
from triforge.maestro.benchmarks.ifbench.checkers.registry import Kwargs
from triforge.maestro.benchmarks.ifbench.sentences import split_sentences
from triforge.maestro.benchmarks.ifbench.text import (
    count_stopwords,
    count_words,
    edge_tokens,
    remove_punct,
    strip_punct,
    word_tokenize,
)

Explainer = Callable[[str, Kwargs], str]


def _stop_words(r: str, kw: Kwargs) -> str:
    n = count_words(r)
    return f"stop words are {count_stopwords(r) / n * 100:.0f}% of {n} words" if n else "no words found"


def _keywords(r: str, kw: Kwargs) -> str:
    text = r.lower()
    keys = [str(kw[f"keyword{i}"]).strip() for i in range(1, 6) if kw.get(f"keyword{i}")]
    return "counts found: " + ", ".join(f"{k}={text.count(k.lower())}" for k in keys)


def _repeats(r: str, kw: Kwargs) -> str:
    top = Counter(remove_punct(r.lower()).split()).most_common(1)
    return f"most repeated word: {top[0][0]!r} x{top[0][1]}" if top else ""


def _sentence_lengths(r: str, kw: Kwargs) -> str:
    counts = [len(remove_punct(s).split()) for s in split_sentences(r)][:12]
    return f"words per sentence: {counts}"


def _names(r: str) -> int:
    return sum(1 for name in PERSON_NAMES if re.search(rf"\b{name}\b", r))


def _words_position(r: str, kw: Kwargs) -> str:
    head, tail = edge_tokens(r, 3)
    return f"second word is {head[1]!r}, last words are {tail}" if len(head) > 1 else "too few words"


EXPLAINERS: dict[str, Explainer] = {
    "count:word_count_range": lambda r, kw: f"found {count_words(r)} words",
    "count:unique_word_count": lambda r, kw: (
        f"found {len({strip_punct(w) for w in r.lower().split()})} unique words"
    ),
    "count:numbers": lambda r, kw: f"found {len(re.findall(r'[0-9]+', remove_punct(r)))} numbers",
    "count:pronouns": lambda r, kw: (
        f"found {sum(t in PRONOUNS for t in word_tokenize(r.replace('/', ' ').lower()))} pronouns"
    ),
    "count:conjunctions": lambda r, kw: (
        f"found {len({w for w in r.split() if strip_punct(w).lower() in CONJUNCTIONS})} distinct conjunctions"
    ),
    "count:person_names": lambda r, kw: f"found {_names(r)} names from the list",
    "count:keywords_multiple": _keywords,
    "ratio:stop_words": _stop_words,
    "ratio:sentence_words": lambda r, kw: f"found {len(split_sentences(r))} sentences",
    "sentence:keyword": lambda r, kw: f"found {len(split_sentences(r))} sentences",
    "sentence:increment": _sentence_lengths,
    "words:keywords_specific_position": lambda r, kw: f"found {len(split_sentences(r))} sentences",
    "words:repeats": _repeats,
    "words:words_position": _words_position,
}


def explain(instruction_id: str, response: str, kwargs: Kwargs) -> str:
    fn = EXPLAINERS.get(instruction_id)
    if fn is None or not response.strip():
        return ""
    try:
        return fn(response, kwargs)
    except (ValueError, KeyError, IndexError, TypeError):
        return ""
