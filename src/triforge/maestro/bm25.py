"""BM25 retrieval (bm25s) over a corpus of titled passages, fully offline.

English stop words are removed; words are stemmed with the Snowball English stemmer when PyStemmer
is installed (`stemmer` says which was used), so indexes built with and without it differ.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError


@dataclass(frozen=True)
class Passage:
    title: str
    text: str


def load_corpus(path: str | Path) -> list[Passage]:
    """A JSONL corpus: one `{"title": ..., "text": ...}` per line (`text` may be a list of sentences)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"corpus file {p} not found")
    out = []
    for lineno, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            title, text = row["title"], row["text"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise UserError(f"{p}:{lineno}: expected a JSON object with 'title' and 'text'") from None
        out.append(Passage(str(title), "".join(text) if isinstance(text, list) else str(text)))
    return out


def _stemmer() -> Any:
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


class BM25Retriever:
    """Indexes passages (title and text together) and returns the best (title, text) pairs."""

    def __init__(self, passages: Iterable[Passage], *, k1: float = 1.5, b: float = 0.75,
                 stem: bool = True) -> None:
        import bm25s

        self.passages = list(passages)
        if not self.passages:
            raise UserError("cannot build a BM25 index over an empty corpus")
        self._bm25s = bm25s
        self._stem = _stemmer() if stem else None
        self.stemmer = "snowball-english" if self._stem is not None else "none"
        tokens = bm25s.tokenize([f"{p.title}. {p.text}" for p in self.passages], stopwords="en",
                                stemmer=self._stem, show_progress=False)
        self._index = bm25s.BM25(k1=k1, b=b)
        self._index.index(tokens, show_progress=False)

    def __getstate__(self) -> dict[str, Any]:
        """Sent to another process (a task on a cluster) without the stemmer, a C object made anew there."""
        return {k: v for k, v in self.__dict__.items() if k != "_stem"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._stem = _stemmer() if self.stemmer != "none" else None

    def search(self, query: str, k: int) -> list[tuple[str, str]]:
        k = min(k, len(self.passages))
        q = self._bm25s.tokenize([query], stopwords="en", stemmer=self._stem, show_progress=False)
        if not q.vocab:  # a query of stop words only matches nothing
            return []
        docs, scores = self._index.retrieve(q, k=k, show_progress=False, n_threads=1)
        hits = [(int(d), float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]
        return [(self.passages[i].title, self.passages[i].text) for i, _ in hits]
