"""IFBench instruction checkers, grouped by family, all registered in `CHECKERS`.

A checker is `fn(response: str, kwargs: dict) -> bool` (strict check of one response
text); `kwargs` are the instruction's non-null kwargs from the benchmark file.
"""

from __future__ import annotations

from triforge.maestro.benchmarks.ifbench.checkers import (  # noqa: F401  (registration side effects)
    count,
    custom,
    format,
    ratio,
    repeat,
    sentence,
    words,
)
from triforge.maestro.benchmarks.ifbench.checkers.registry import CHECKERS, DESCRIPTIONS, Checker, Kwargs


def describe(instruction_id: str, kwargs: Kwargs) -> str:
    """The instruction in plain words, with its kwargs filled in."""
    template = DESCRIPTIONS.get(instruction_id, instruction_id)
    try:
        return template.format(**{k: _short(v) for k, v in kwargs.items()})
    except (KeyError, IndexError, ValueError):
        return template


def _short(value: object) -> object:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and len(value) > 80:
        return value[:77] + "..."
    return value


__all__ = ["CHECKERS", "DESCRIPTIONS", "Checker", "Kwargs", "describe"]
