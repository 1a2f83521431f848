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

_NAMES = r"think|thinking|thought|reasoning|seed:think"
# (opening, closing) of each spelling; the opening must start the reply or a line
_KINDS = [
    (re.compile(rf"<\s*(?P<name>{_NAMES})\s*>", re.I), r"<\s*/\s*{name}\s*>"),
    (re.compile(r"\[THINK\]"), r"\[/THINK\]"),
    (re.compile(r"◁think▷"), r"◁/think▷"),
    (re.compile(r"(?:<\|start\|>\s*assistant\s*)?<\|channel\|>\s*analysis\s*<\|message\|>"), r"<\|end\|>"),
]
_LINE_START = re.compile(r"(?:\A|(?<=\n))[ \t]*")
_HARMONY_WRAPPER = re.compile(r"<\|start\|>\s*assistant\s*|<\|channel\|>\s*final\s*<\|message\|>|<\|(?:end|return)\|>")


def _close_of(kind: int, m: re.Match[str]) -> re.Pattern[str]:
    close = _KINDS[kind][1]
    if "{name}" in close:
        close = close.format(name=re.escape(m.group("name")))
    return re.compile(close, re.I)


def _next_block(text: str, pos: int) -> tuple[int, re.Match[str]] | None:
    """The earliest opening tag at or after `pos` that starts a line: (its kind, its match)."""
    best: tuple[int, re.Match[str]] | None = None
    for start in _LINE_START.finditer(text, pos):
        for kind, (opening, _) in enumerate(_KINDS):
            m = opening.match(text, start.end())
            if m is not None and (best is None or m.start() < best[1].start()):
                best = (kind, m)
        if best is not None:
            return best
    return None


def _lone_close(text: str) -> re.Match[str] | None:
    """A closing tag alone on its line with no opening tag of its kind before it (the prompt opened it)."""
    found = None
    for opening, close in _KINDS:
        names = _NAMES.split("|") if "{name}" in close else [""]
        for name in names:
            pat = re.compile(r"^[ \t]*" + close.format(name=re.escape(name)) + r"[ \t]*$", re.I | re.M)
            m = pat.search(text)
            if m is None or (found is not None and m.start() >= found.start()):
                continue
            if not any(om.group(0) and (not name or om.groupdict().get("name", "").lower() == name)
                       for om in opening.finditer(text, 0, m.start())):
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
        harmony = harmony or kind == len(_KINDS) - 1
        close = _close_of(kind, m).search(text, m.end())
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
