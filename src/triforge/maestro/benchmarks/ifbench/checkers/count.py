"""Counting instructions: words, unique words, names, numbers, pronouns, keywords."""

from __future__ import annotations

import re

from triforge.maestro.benchmarks.ifbench.checkers.registry import Kwargs, as_int, register
from triforge.maestro.benchmarks.ifbench.text import (
    count_words,
    remove_punct,
    strip_punct,
    word_tokenize,
)

PERSON_NAMES = (
    "Emma Liam Sophia Jackson Olivia Noah Ava Lucas Isabella Mason Mia Ethan Charlotte "
    "Alexander Amelia Benjamin Harper Leo Zoe Daniel Chloe Samuel Lily Matthew Grace Owen "
    "Abigail Gabriel Ella Jacob Scarlett Nathan Victoria Elijah Layla Nicholas Audrey David "
    "Hannah Christopher Penelope Thomas Nora Andrew Aria Joseph Claire Ryan Stella Jonathan"
).split()

CONJUNCTIONS = frozenset({"and", "but", "for", "nor", "or", "so", "yet"})

PRONOUNS = frozenset(
    """
    i me we us you he him she her it they them my mine our ours your yours his hers its
    their theirs myself ourselves yourself yourselves himself herself itself themselves
    this that these those who whom whose which what whoever whomever whatever whichever
    anybody anyone anything everybody everyone everything nobody nothing somebody someone
    something each either neither both all some any none
    """.split()
)

_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


@register("count:word_count_range", "The response must contain between {min_words} and {max_words} words.")
def word_count_range(response: str, kw: Kwargs) -> bool:
    return as_int(kw, "min_words") <= count_words(response) <= as_int(kw, "max_words")


@register("count:unique_word_count", "Use at least {N} unique words.")
def unique_word_count(response: str, kw: Kwargs) -> bool:
    unique = {strip_punct(w) for w in response.lower().split()}
    return len(unique) >= as_int(kw, "N")


@register(
    "count:conjunctions",
    "Use at least {small_n} different coordinating conjunctions (and, but, for, nor, or, so, yet).",
)
def conjunctions(response: str, kw: Kwargs) -> bool:
    # As in the official checker, distinct spellings ("and", "And,") count separately.
    used = {w for w in response.split() if strip_punct(w).lower() in CONJUNCTIONS}
    return len(used) >= as_int(kw, "small_n")


@register("count:person_names", "Mention at least {N} different person names from the given list.")
def person_names(response: str, kw: Kwargs) -> bool:
    found = {name for name in PERSON_NAMES if re.search(rf"\b{re.escape(name)}\b", response)}
    return len(found) >= as_int(kw, "N")


@register("count:numbers", "Include exactly {N} numbers.")
def numbers(response: str, kw: Kwargs) -> bool:
    return len(re.findall(r"\d+", remove_punct(response))) == as_int(kw, "N")


@register("count:words_japanese", "Every {N}th word must be in Japanese.")
def words_japanese(response: str, kw: Kwargs) -> bool:
    step = as_int(kw, "N")
    for i, raw in enumerate(response.split(), start=1):
        word = strip_punct(raw)
        if i % step == 0 and word and not word.isdigit() and not _JAPANESE.search(word):
            return False
    return True


@register("count:pronouns", "Include at least {N} pronouns.")
def pronouns(response: str, kw: Kwargs) -> bool:
    tokens = word_tokenize(response.replace("/", " ").lower())
    return sum(1 for t in tokens if t in PRONOUNS) >= as_int(kw, "N")


@register(
    "count:punctuation",
    "Use every standard punctuation mark (. , ! ? ; :) at least once, plus the interrobang (?!).",
)
def punctuation(response: str, kw: Kwargs) -> bool:
    if "?!" in response:
        rest = response.replace("?!", "", 1)
    elif "!?" in response:
        rest = response.replace("!?", "", 1)
    elif "‽" in response:
        rest = response
    else:
        return False
    return set(".,!?;:") <= set(rest)


@register(
    "count:keywords_multiple",
    "Include keyword {keyword1} once, {keyword2} twice, {keyword3} three times, {keyword4} five times and {keyword5} seven times.",
)
def keywords_multiple(response: str, kw: Kwargs) -> bool:
    text = response.lower()
    for key, times in (("keyword1", 1), ("keyword2", 2), ("keyword3", 3), ("keyword4", 5), ("keyword5", 7)):
        if text.count(str(kw[key]).strip().lower()) != times:
            return False
    return True
