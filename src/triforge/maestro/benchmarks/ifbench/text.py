"""Offline text utilities shared by the IFBench checkers.

Everything here is pure Python: a Treebank-style word tokenizer (what `nltk.word_tokenize`
does, applied sentence by sentence), word counting on `\\w+` runs, NLTK's English stop
word list, a syllable counter and an emoji test.
"""

from __future__ import annotations

import re
import string
import unicodedata
from functools import lru_cache

from triforge.maestro.benchmarks.ifbench.emoji_table import is_emoji_code_point
from triforge.maestro.benchmarks.ifbench.sentences import split_sentences

PUNCT = string.punctuation
_STRIP = PUNCT + " "
_DELETE_PUNCT = str.maketrans("", "", PUNCT)

# NLTK's English stop word list (tokens here come from \w+, so forms with
# apostrophes can never match and are left out).
STOPWORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma
    mightn mustn needn shan shouldn wasn weren won wouldn
    """.split()
)

_WORD_RE = re.compile(r"\w+")


def strip_punct(word: str) -> str:
    """Strip ASCII punctuation and spaces from both ends."""
    return word.strip(_STRIP)


def remove_punct(text: str) -> str:
    """Delete every ASCII punctuation character."""
    return text.translate(_DELETE_PUNCT)


def words(text: str) -> list[str]:
    """Runs of word characters (letters, digits, underscore)."""
    return _WORD_RE.findall(text)


def count_words(text: str) -> int:
    return len(words(text))


def count_stopwords(text: str) -> int:
    return sum(1 for w in words(text) if w.lower() in STOPWORDS)


# --- Treebank-style word tokenizer ---------------------------------------------------

_STARTING = [
    (re.compile(r"([«“‘„]|[`]+)"), r" \1 "),
    (re.compile(r"^\""), r"``"),
    (re.compile(r"(``)"), r" \1 "),
    (re.compile(r"([ \(\[{<])(\"|\'{2})"), r"\1 `` "),
    (re.compile(r"(?i)(\')(?!re|ve|ll|m|t|s|d|n)(\w)\b", re.U), r"\1 \2"),
]
_ENDING = [
    (re.compile(r"([»”’])"), r" \1 "),
    (re.compile(r"''"), " '' "),
    (re.compile(r'"'), " '' "),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
]
_PUNCTUATION = [
    (re.compile(r'([^\.])(\.)([\]\)}>"\']*)\s*$', re.U), r"\1 \2 \3 "),
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.{2,}", re.U), r" \g<0> "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r'([^\.])(\.)([\]\)}>"\']*)\s*$'), r"\1 \2\3 "),
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"[*]", re.U), r" \g<0> "),
]
_PARENS = (re.compile(r"[\]\[\(\)\{\}\<\>]"), r" \g<0> ")
_DASHES = (re.compile(r"--"), r" -- ")
_CONTRACTIONS = [
    re.compile(p, re.I)
    for p in (
        r"\b(can)(not)\b",
        r"\b(d)('ye)\b",
        r"\b(gim)(me)\b",
        r"\b(gon)(na)\b",
        r"\b(got)(ta)\b",
        r"\b(lem)(me)\b",
        r"\b(more)('n)\b",
        r"\b(wan)(na)(?=\s)",
        r" ('t)(is)\b",
        r" ('t)(was)\b",
    )
]


@lru_cache(maxsize=65536)
def _treebank(sentence: str) -> tuple[str, ...]:
    text = sentence
    for regexp, sub in _STARTING:
        text = regexp.sub(sub, text)
    for regexp, sub in _PUNCTUATION:
        text = regexp.sub(sub, text)
    text = _PARENS[0].sub(_PARENS[1], text)
    text = _DASHES[0].sub(_DASHES[1], text)
    text = " " + text + " "
    for regexp, sub in _ENDING:
        text = regexp.sub(sub, text)
    for regexp in _CONTRACTIONS:
        text = regexp.sub(r" \1 \2 ", text)
    return tuple(text.split())


def word_tokenize(text: str) -> list[str]:
    """Split into sentences, then Treebank-tokenize each sentence (like `nltk.word_tokenize`)."""
    return [tok for sent in split_sentences(text) for tok in _treebank(sent)]


def first_tokens(text: str) -> list[str]:
    """Tokens of the first sentence only (cheap on long texts)."""
    sents = split_sentences(text)
    return list(_treebank(sents[0])) if sents else []


def edge_tokens(text: str, k: int = 3) -> tuple[list[str], list[str]]:
    """The first `k` and last `k` tokens of `word_tokenize(text)`, without tokenizing the middle."""
    sents = split_sentences(text)
    head: list[str] = []
    for sent in sents:
        head.extend(_treebank(sent))
        if len(head) >= k:
            break
    tail: list[str] = []
    for sent in reversed(sents):
        tail[:0] = _treebank(sent)
        if len(tail) >= k:
            break
    return head[:k], tail[-k:]


# --- syllables -----------------------------------------------------------------------

_VOWEL_GROUPS = re.compile(r"[aeiouy]+")

try:  # the syllable counter the official checker uses (small, pure Python, offline)
    import syllapy as _syllapy
except ImportError:  # pragma: no cover - exercised only where syllapy is not installed
    _syllapy = None

SYLLABLE_COUNTER = f"syllapy {_syllapy.__version__}" if _syllapy is not None else "builtin heuristic"


def heuristic_syllables(word: str) -> int:
    """Vowel groups, less a silent final e (but not consonant + le); words with digits count 0."""
    w = word.strip().lower().strip(PUNCT)
    if not w or any(ch.isdigit() for ch in w):
        return 0
    w = "".join(ch for ch in w if ch.isalpha())
    count = len(_VOWEL_GROUPS.findall(w))
    if count > 1 and w.endswith("e") and not (len(w) > 2 and w.endswith("le") and w[-3] not in "aeiouy"):
        count -= 1
    return max(count, 1) if w else 0


def syllable_count(word: str) -> int:
    """Syllables in one word: syllapy's count when installed, else `heuristic_syllables`."""
    if _syllapy is not None:
        return int(_syllapy.count(word))
    return heuristic_syllables(word)


def is_emoji(char: str) -> bool:
    """True for a single code point that is an emoji on its own."""
    return len(char) == 1 and is_emoji_code_point(ord(char))


def ascii_fold(text: str) -> str:
    """'São Tomé' -> 'Sao Tome': NFKD, then drop what is not ASCII."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
