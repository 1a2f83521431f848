"""CappedText: bounded memory, head and tail kept, the whole text spilled on request."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from triforge.sandbox.output import CappedText, strip_ansi


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=50), max_size=30), st.integers(min_value=1, max_value=100))
def test_capped_text_keeps_head_and_tail(chunks, limit):
    full = "".join(chunks)
    cap = CappedText(limit)
    for c in chunks:
        cap.add(c)
    out = cap.text()
    if len(full) <= limit:
        assert out == full and not cap.truncated
        return
    assert cap.truncated
    m = re.fullmatch(r"(.*)\n\[\.\.\. (\d+) characters cut \.\.\.\]\n(.*)", out, re.S)
    assert m, out
    head, cut, tail = m.group(1), int(m.group(2)), m.group(3)
    assert full.startswith(head) and full.endswith(tail)
    assert len(head) + len(tail) == limit and len(head) + cut + len(tail) == len(full)


def test_spill_file_holds_everything(tmp_path):
    spill = tmp_path / "out" / "cell.txt"
    cap = CappedText(10, spill)
    cap.add("0123456")
    assert not spill.exists()
    for i in range(1000):
        cap.add(f"{i},")
    text = cap.text()
    assert spill.read_text() == "0123456" + "".join(f"{i}," for i in range(1000))
    assert str(spill) in text and text.startswith("012345") and text.endswith("999,")


def test_strip_ansi():
    assert strip_ansi("\x1b[31mError\x1b[39m: x") == "Error: x"


def test_spill_file_is_bounded(tmp_path):
    spill = tmp_path / "cell.txt"
    cap = CappedText(10, spill, spill_limit=100)
    for _ in range(100):
        cap.add("abcdefghij")
    cap.text()
    text = spill.read_text()
    assert text.startswith("abcdefghij" * 10) and "the rest is not kept" in text and len(text) < 200
