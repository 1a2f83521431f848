"""Thinking written into the reply text, split from the answer so that it is kept, never acted on.

Thinking models served without a reasoning parser (Qwen3, QwQ, R1 distills on llama.cpp or Ollama) start
their content with `<think> ... </think>`; a chat template that opens the block in the prompt leaves only
the closing tag, on a line of its own. Nothing inside the thinking is a tool call or code to run.
"""

from __future__ import annotations

import re

_OPEN = re.compile(r"\A\s*<\s*think\s*>", re.I)
_CLOSE = re.compile(r"<\s*/\s*think\s*>", re.I)
_ANY_OPEN = re.compile(r"<\s*think\s*>", re.I)
# A closing tag alone on its line (a string inside a JSON tool call cannot hold a raw line break).
_LONE_CLOSE = re.compile(r"^[ \t]*<\s*/\s*think\s*>[ \t]*$", re.I | re.M)


def split_thinking(text: str | None) -> tuple[str | None, str | None]:
    """(thinking, answer): leading <think> blocks (an unclosed one is all thinking) or, with no opening tag,
    everything before a lone closing tag line; (None, text) when there is none."""
    if not text:
        return None, text
    thoughts: list[str] = []
    rest = text
    while (m := _OPEN.match(rest)) is not None:
        close = _CLOSE.search(rest, m.end())
        if close is None:
            thoughts.append(rest[m.end():].strip())
            rest = ""
            break
        thoughts.append(rest[m.end():close.start()].strip())
        rest = rest[close.end():]
    if not thoughts and (close := _LONE_CLOSE.search(rest)) is not None and not _ANY_OPEN.search(rest[:close.start()]):
        thoughts.append(rest[:close.start()].strip())
        rest = rest[close.end():]
    if not thoughts:
        return None, text
    return "\n\n".join(t for t in thoughts if t) or "", rest.lstrip()


def join_thinking(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return "\n\n".join(kept) if kept else None
