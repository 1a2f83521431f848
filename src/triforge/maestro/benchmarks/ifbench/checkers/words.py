"""Word-level instructions: letters, vowels, consonants, lengths, repeats, positions."""

from __future__ import annotations

import string
from collections import Counter

from triforge.maestro.benchmarks.ifbench.checkers.registry import Kwargs, as_int, register
from triforge.maestro.benchmarks.ifbench.checkers.verbs import starts_with_verb
from triforge.maestro.benchmarks.ifbench.sentences import split_sentences
from triforge.maestro.benchmarks.ifbench.text import (
    PUNCT,
    edge_tokens,
    first_tokens,
    remove_punct,
    strip_punct,
    syllable_count,
    word_tokenize,
)

_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")
_PRIMES = frozenset(p for p in range(2, 100) if all(p % d for d in range(2, int(p**0.5) + 1)))


@register(
    "words:alphabet", "Each word must start with the next letter of the alphabet, looping back to A after Z."
)
def alphabet(response: str, kw: Kwargs) -> bool:
    ws = [w.lower() for w in remove_punct(response).split()]
    if not ws:
        return False
    letter = ws[0][0]
    if letter not in string.ascii_lowercase:
        return False
    for word in ws[1:]:
        letter = chr((ord(letter) - ord("a") + 1) % 26 + ord("a"))
        if word[0] != letter:
            return False
    return True


@register("words:vowel", "Write a single paragraph whose words use at most three different vowels.")
def vowel(response: str, kw: Kwargs) -> bool:
    lines = response.strip().split("\n")
    return len(lines) == 1 and len(set(lines[0].lower()) & set("aeiou")) <= 3


@register("words:consonants", "Every word must contain a consonant cluster (two consonants in a row).")
def consonants(response: str, kw: Kwargs) -> bool:
    for word in response.lower().split():
        if not any(a in _CONSONANTS and b in _CONSONANTS for a, b in zip(word, word[1:], strict=False)):
            return False
    return True


@register("words:palindrome", "Include at least 10 single-word palindromes of at least 5 letters.")
def palindrome(response: str, kw: Kwargs) -> bool:
    ws = remove_punct(response).lower().split()
    return sum(1 for w in ws if len(w) >= 5 and w == w[::-1]) >= 10


@register("words:prime_lengths", "Use only words whose lengths are prime numbers.")
def prime_lengths(response: str, kw: Kwargs) -> bool:
    return all(len(w) in _PRIMES for w in remove_punct(response).split())


@register("words:start_verb", "The response must start with a verb.")
def start_verb(response: str, kw: Kwargs) -> bool:
    return starts_with_verb(first_tokens(response))


@register("words:repeats", "Do not repeat any word more than {small_n} times.")
def repeats(response: str, kw: Kwargs) -> bool:
    counts = Counter(remove_punct(response.lower()).split())
    return all(c <= as_int(kw, "small_n") for c in counts.values())


@register("words:odd_even_syllables", "Alternate between words with odd and even numbers of syllables.")
def odd_even_syllables(response: str, kw: Kwargs) -> bool:
    parities = [syllable_count(w) % 2 for w in remove_punct(response).lower().split()]
    return all(a != b for a, b in zip(parities, parities[1:], strict=False))


@register("words:last_first", "The last word of each sentence must be the first word of the next sentence.")
def last_first(response: str, kw: Kwargs) -> bool:
    sents = split_sentences(response)
    for cur, nxt in zip(sents, sents[1:], strict=False):
        last = cur.rstrip(PUNCT + " ").split()
        first = nxt.lstrip(PUNCT + " ").split()
        if not last or not first or last[-1].lower() != first[0].lower():
            return False
    return True


@register(
    "words:paragraph_last_first",
    "Each paragraph must end with the word it starts with; separate paragraphs with a newline.",
)
def paragraph_last_first(response: str, kw: Kwargs) -> bool:
    for line in response.split("\n"):
        ws = strip_punct(line.strip().lower()).split()
        if ws and ws[0] != ws[-1]:
            return False
    return True


@register("words:no_consecutive", "No two consecutive words may start with the same letter.")
def no_consecutive(response: str, kw: Kwargs) -> bool:
    ws = remove_punct(response.lower()).split()
    return all(a[0] != b[0] for a, b in zip(ws, ws[1:], strict=False))


@register(
    "words:keywords_specific_position",
    "Put the keyword {keyword} in sentence {n} as word number {m} of that sentence.",
)
def keywords_specific_position(response: str, kw: Kwargs) -> bool:
    n, m = as_int(kw, "n"), as_int(kw, "m")
    sents = split_sentences(response)
    if n < 1 or m < 1 or len(sents) < n:
        return False
    toks = [t for t in word_tokenize(sents[n - 1]) if any(ch.isalnum() for ch in t)]
    return len(toks) >= m and toks[m - 1].lower() == str(kw["keyword"]).strip().lower()


@register("words:words_position", "The second word and the second-to-last word must both be {keyword}.")
def words_position(response: str, kw: Kwargs) -> bool:
    head, tail = edge_tokens(response, 3)
    key = str(kw["keyword"]).strip().lower()
    if tail and tail[-1] in PUNCT:  # a final punctuation token does not count as a word
        tail = tail[:-1]
        if len(head) < 3:
            return False
    if len(head) < 2 or len(tail) < 2:
        return False
    return head[1].lower() == key and tail[-2].lower() == key
