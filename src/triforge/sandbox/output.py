"""Capped capture of kernel output: head and tail kept in memory, the whole text optionally spilled to a file."""

from __future__ import annotations

import re
from collections import deque
from io import TextIOWrapper
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


class CappedText:
    """Accumulates text without ever holding more than about `limit` characters.

    Once the text outgrows `limit`, the first two thirds of the limit and the last third are kept;
    if `spill` is given, the complete text (up to `spill_limit` characters) is written there; the file
    is created only then.
    """

    def __init__(self, limit: int, spill: Path | None = None, spill_limit: int = 200 << 20) -> None:
        self.limit = max(limit, 0) or 1 << 62
        self._head_limit = self.limit * 2 // 3
        self._tail_limit = self.limit - self._head_limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.total = 0
        self._spill = spill
        self._file: TextIOWrapper | None = None
        self._spill_limit = spill_limit
        self.spilled_to: Path | None = None

    def add(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        if self._file is not None:
            if self.total <= self._spill_limit:
                self._file.write(text)
            elif self.total - len(text) <= self._spill_limit:
                self._file.write(f"\n[... the rest is not kept: more than {self._spill_limit} characters ...]\n")
        elif self._spill is not None and self.total > self.limit:
            self._open_spill(text)
        room = self._head_limit - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += min(room, len(text))
            text = text[room:]
        if text:
            self._tail.append(text)
            self._tail_len += len(text)
            while self._tail and self._tail_len - len(self._tail[0]) >= self._tail_limit:
                self._tail_len -= len(self._tail.popleft())

    def _open_spill(self, text: str) -> None:
        assert self._spill is not None
        try:
            self._spill.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self._spill, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
            self._file.write("".join(self._head) + "".join(self._tail) + text)
            self.spilled_to = self._spill
        except OSError:
            self._file = None
            self._spill = None

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        if self._file is not None:
            self._file.close()
            self._file = None
        head = "".join(self._head)
        tail = "".join(self._tail)
        if not self.truncated:
            return head + tail
        tail = tail[-self._tail_limit :] if self._tail_limit else ""
        cut = self.total - len(head) - len(tail)
        where = f"; full text in {self.spilled_to}" if self.spilled_to else ""
        return f"{head}\n[... {cut} characters cut{where} ...]\n{tail}"
