"""Functions that test programs reference as `maestro_fns:NAME` (tests/maestro is on sys.path)."""

from __future__ import annotations

from typing import Any


def shout(text: str, suffix: str = "!") -> str:
    return text.upper() + suffix


def split_words(text: str) -> dict[str, Any]:
    words = text.split()
    return {"words": words, "count": len(words)}


def bad_type(text: str) -> str:
    return len(text)  # type: ignore[return-value]  # a code node that returns the wrong type


def boom(text: str) -> str:
    raise RuntimeError("planted failure")


def has_marker(answer: str, marker: str = "OK") -> tuple[bool, str]:
    return (marker in answer, f"the answer must contain {marker!r}")


def always_false(answer: str) -> bool:
    return False


def with_llm(prompt: str, llm: Any, sample: int = 0) -> dict[str, Any]:
    comp = llm.complete([{"role": "user", "content": prompt}], sample=sample)
    return {"reply": comp.content, "sample_seen": str(sample)}
