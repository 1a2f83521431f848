"""Thinking written into the reply text, split from the answer so that it is kept, never acted on.

Thinking models served without a reasoning parser write their thinking into the content: Qwen3, QwQ, R1
distills, GLM and MiniMax as `<think> ... </think>` (MiniMax also between tool calls, not only first), others
as `<thinking>`, `<thought>`, `<reasoning>` or `<seed:think>` blocks, Magistral as `[THINK] ... [/THINK]`, Kimi
as `◁think▷ ... ◁/think▷`, gpt-oss (harmony format, raw) as an `analysis` channel. A chat template that opens
the block in the prompt leaves only the closing tag, on a line of its own. A block starts the reply or a line
(a tag inside a sentence, or inside a JSON tool call, whose strings hold no raw line break, is text); an
unclosed block runs to the end of the reply. Nothing inside the thinking is a tool call or code to run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TAGS = ("think", "thinking", "thought", "reasoning", "seed:think")
_HARMONY_OPEN = r"(?:<\|start\|>\s*assistant\s*)?<\|channel\|>\s*analysis\s*<\|message\|>"
# (opening, closing, flags) of each spelling; the opening must start the reply or a line
_SPELLINGS = [*((rf"<\s*{re.escape(t)}\s*>", rf"<\s*/\s*{re.escape(t)}\s*>", re.I) for t in _TAGS),
              (r"\[THINK\]", r"\[/THINK\]", 0), (r"◁think▷", r"◁/think▷", 0), (_HARMONY_OPEN, r"<\|end\|>", 0)]


@dataclass(frozen=True)
class _Kind:
    opening: re.Pattern[str]
    closing: re.Pattern[str]
    lone_closing: re.Pattern[str]  # a closing tag alone on its line
    harmony: bool


_KINDS = [_Kind(re.compile(o, f), re.compile(c, f), re.compile(rf"^[ \t]*{c}[ \t]*$", f | re.M), o == _HARMONY_OPEN)
          for o, c, f in _SPELLINGS]
_LINE_START = re.compile(r"(?:\A|(?<=\n))[ \t]*")
_HARMONY_WRAPPER = re.compile(r"<\|start\|>\s*assistant\s*|<\|channel\|>\s*final\s*<\|message\|>|<\|(?:end|return)\|>")


def _next_block(text: str, pos: int) -> tuple[_Kind, re.Match[str]] | None:
    """The earliest opening tag at or after `pos` that starts a line: its kind and its match."""
    for start in _LINE_START.finditer(text, pos):
        for kind in _KINDS:
            if (m := kind.opening.match(text, start.end())) is not None:
                return kind, m
    return None


def _lone_close(text: str) -> re.Match[str] | None:
    """The first closing tag alone on its line with no opening tag of its kind before it (the prompt opened it)."""
    found = None
    for kind in _KINDS:
        m = kind.lone_closing.search(text)
        if m is not None and (found is None or m.start() < found.start()) and \
                kind.opening.search(text, 0, m.start()) is None:
            found = m
    return found


def split_thinking(text: str | None) -> tuple[str | None, str | None]:
    """(thinking, answer): every thinking block (an unclosed one runs to the end) or, with no opening tag,
    everything before a lone closing tag line; (None, text) when there is none."""
    if not text:
        return None, text
    thoughts: list[str] = []
    answer: list[str] = []
    pos = 0
    harmony = False
    while (found := _next_block(text, pos)) is not None:
        kind, m = found
        answer.append(text[pos:m.start()].rstrip(" \t"))  # the block's indentation goes with it
        harmony = harmony or kind.harmony
        close = kind.closing.search(text, m.end())
        if close is None:
            thoughts.append(text[m.end():].strip())
            pos = len(text)
            break
        thoughts.append(text[m.end():close.start()].strip())
        pos = close.end()
    answer.append(text[pos:])
    if not thoughts and (close := _lone_close(text)) is not None:
        thoughts.append(text[:close.start()].strip())
        answer = [text[close.end():]]
    if not thoughts:
        return None, text
    rest = "\n".join(part.strip("\n") for part in answer if part.strip())
    if harmony:
        rest = _HARMONY_WRAPPER.sub("", rest)
    return "\n\n".join(t for t in thoughts if t) or "", rest.lstrip()


def join_thinking(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return "\n\n".join(kept) if kept else None
