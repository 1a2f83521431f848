"""The checker registry: instruction id -> check function and plain-words description."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Kwargs = dict[str, Any]
Checker = Callable[[str, Kwargs], bool]

CHECKERS: dict[str, Checker] = {}
DESCRIPTIONS: dict[str, str] = {}


def register(instruction_id: str, description: str) -> Callable[[Checker], Checker]:
    """Register `fn(response, kwargs) -> bool` under `instruction_id`.

    `description` is a `str.format` template over the instruction's kwargs, used in
    feedback ("Include exactly {N} numbers.").
    """

    def deco(fn: Checker) -> Checker:
        if instruction_id in CHECKERS:
            raise ValueError(f"duplicate checker for {instruction_id}")
        CHECKERS[instruction_id] = fn
        DESCRIPTIONS[instruction_id] = description
        return fn

    return deco


def as_int(kwargs: Kwargs, key: str) -> int:
    """Integer kwarg (the data stores some as floats: 100.0)."""
    value = kwargs.get(key)
    if value is None:
        raise KeyError(f"missing kwarg {key!r}")
    return int(value)
