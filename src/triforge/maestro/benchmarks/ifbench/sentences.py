"""Offline sentence splitting that behaves like NLTK's English Punkt tokenizer.

The official IFBench checkers split responses with `nltk.sent_tokenize`. NLTK data
cannot be downloaded here, so this module re-implements the Punkt decision procedure
(Kiss & Strunk 2006) with a small hand-written abbreviation list and a crude stand-in
for the learned orthographic statistics. Properties that matter for the checkers:

* only `.`, `?` and `!` end sentences, and only when followed by whitespace and another
  token or by one of the "non-word" characters; a newline alone never splits;
* `?` and `!` always split; a period splits unless its word is a known abbreviation,
  an ellipsis, or a number/initial followed by a word that does not look like a
  sentence start;
* closing quotes and brackets after a break move back to the sentence they close.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Common English abbreviations (lower case, without the final period).
ABBREVIATIONS = frozenset(
    """
    c d e f g h k l m n p r s t v w
    mr mrs ms messrs dr prof jr sr st rep reps sen gen col lt maj adm bros
    inc ltd co corp cos cie
    jan feb aug sep sept oct nov dec mon tues wed fri yr
    ave ft mg vs ok chg sw ct
    ala ariz calif colo conn fla ga ill kan ky mich minn nev okla ore pa tenn va vt wash wis
    a.m p.m u.s u.k u.n u.s.a u.s.s.r d.c n.y n.j ph.d m.b.a l.a
    """.split()
)

# Words that often open a sentence (lower case).
SENTENCE_STARTERS = frozenset(
    """
    according although among both but despite even he however i if in indeed instead it
    many meanwhile moreover most nevertheless nonetheless nor since so some the there
    these they this though thus under when while yet
    """.split()
)

_NONWORD = r"""[?!)";}\]*:@'({\[]"""
_WORD_START = r"""[^("`{\[:;&#*@)}\]\-,]"""
_MULTI = r"(?:-{2,}|\.{2,}|(?:\.\s){2,}\.)"
_WORD_RE = re.compile(
    rf"({_MULTI}|(?={_WORD_START})\S+?(?=\s|$|{_NONWORD}|{_MULTI}|,(?=$|\s|{_NONWORD}|{_MULTI}))|\S)"
)
_CANDIDATE_RE = re.compile(rf"[.?!](?=(?P<after>{_NONWORD}|\s+(?P<next>\S+)))")
_NUMBER_RE = re.compile(r"^-?[.,]?\d[\d,.-]*\.?$")
_ELLIPSIS_RE = re.compile(r"\.\.+$")
_INITIAL_RE = re.compile(r"[^\W\d]\.$")
_REALIGN_RE = re.compile(r"""["')\]}]+?(?:\s+|(?=--)|$)""")
_WS_RE = re.compile(r"\s")

# Stand-in for Punkt's learned orthographic context: capitalised words that were seen in
# lower case but never capitalised inside a sentence, so a capital means a new sentence.
# (Most function words, "The" included, also occur capitalised mid-sentence in titles.)
_STARTER_WORDS = SENTENCE_STARTERS | frozenset(
    """
    finally her here indeed instead moreover nevertheless nonetheless nor so such them
    though thus were which yes yet your
    """.split()
)


def _word_type(tok: str) -> str:
    if _NUMBER_RE.match(tok):
        return "##number##" + ("." if tok.endswith(".") else "")
    return tok.lower()


def _ortho_says_start(tok: str) -> bool | None:
    """True: looks like a sentence start, False: does not, None: unknown."""
    if tok in (";", ":", ",", ".", "!", "?"):
        return False
    first = tok[0]
    if first.isupper():
        return True if tok.lower().rstrip(".") in _STARTER_WORDS else None
    if first.islower():
        return False
    return None


def _looks_like_word(tok: str) -> bool:
    """A capitalised ordinary word (not an acronym or a code) after an initial such as `A.`."""
    return tok[:1].isupper() and tok[1:].islower() and tok.isalpha()


def _is_sentbreak(tok: str, nxt: str | None) -> bool:
    """Punkt's first and second pass for one token, given the token after it."""
    if tok in (".", "?", "!"):
        return True
    if not tok.endswith("."):
        return False
    typ = _word_type(tok)
    bare = typ[:-1]
    ellipsis = bool(_ELLIPSIS_RE.search(tok)) or tok.endswith("..")
    abbr = not ellipsis and (bare in ABBREVIATIONS or bare.split("-")[-1] in ABBREVIATIONS)
    initial = bool(_INITIAL_RE.match(tok))
    if nxt is None:
        return not (ellipsis or abbr)
    if (abbr or ellipsis) and not initial:
        verdict = _ortho_says_start(nxt)
        return verdict is True or (nxt[:1].isupper() and nxt.lower() in SENTENCE_STARTERS)
    if abbr:
        return False
    if initial or typ.startswith("##number##"):
        verdict = _ortho_says_start(nxt)
        if verdict is False:
            return False
        if verdict is None and initial and nxt[:1].isupper() and not _looks_like_word(nxt):
            return False
    return True


def _context_has_break(context: str) -> bool:
    toks = _WORD_RE.findall(context)
    for i, tok in enumerate(toks[:-1]):
        if _is_sentbreak(tok, toks[i + 1]):
            return True
    return False


def _break_positions(text: str) -> list[tuple[int, int]]:
    """(end of sentence, start of next) for every break, in order."""
    matches = list(_CANDIDATE_RE.finditer(text))
    out: list[tuple[int, int]] = []
    prev_stop = 0  # end of the previous candidate's word slice
    prev_start = 0
    pending: tuple[re.Match[str], int] | None = None
    for m in matches:
        before = text[prev_stop : m.start()]
        last_ws = max((w.start() for w in _WS_RE.finditer(before)), default=0)
        start = prev_stop + last_ws + 1 if last_ws else prev_start
        if pending is not None and prev_stop <= start:
            out.extend(_decide(text, *pending))
        pending = (m, start)
        prev_start, prev_stop = start, m.start()
    if pending is not None:
        out.extend(_decide(text, *pending))
    return out


def _decide(text: str, m: re.Match[str], word_start: int) -> list[tuple[int, int]]:
    context = text[word_start : m.start()] + m.group(0) + m.group("after")
    if not _context_has_break(context):
        return []
    nxt = m.start("next") if m.group("next") else m.end()
    return [(m.end(), nxt)]


@lru_cache(maxsize=256)
def _split_cached(text: str) -> tuple[str, ...]:
    spans: list[tuple[int, int]] = []
    last = 0
    for end, nxt in _break_positions(text):
        spans.append((last, end))
        last = nxt
    spans.append((last, len(text.rstrip())))
    sentences: list[str] = []
    shift = 0
    for i, (start, stop) in enumerate(spans):
        start += shift
        shift = 0
        if i + 1 < len(spans):
            m = _REALIGN_RE.match(text, spans[i + 1][0], spans[i + 1][1])
            if m:
                stop = spans[i + 1][0] + len(m.group(0).rstrip())
                shift = m.end() - spans[i + 1][0]
        if start < stop and text[start:stop]:
            sentences.append(text[start:stop])
    return tuple(sentences)


def split_sentences(text: str) -> list[str]:
    """Split `text` into sentences the way NLTK's English Punkt model does (approximately)."""
    return list(_split_cached(text))
