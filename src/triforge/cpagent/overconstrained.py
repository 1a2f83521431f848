"""Restrictions that some reference models add but the problem text does not state, and how to lift them.

The list lives in `overconstrained.toml` beside this module. An entry either quotes reference code to
replace (`find`, exact text, and `replace`), or names output keys whose text allows booleans and 0/1
integers alike (`bool_or_01`); it says why, and may carry a valid alternative solution of the default
instance that the reference rejects but the text admits (the tests grade it and expect `correct`).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

DATA_FILE = Path(__file__).with_name("overconstrained.toml")


@dataclass(frozen=True)
class Relaxation:
    problem_id: str
    find: str  # '' for an output-type entry
    replace: str
    restriction: str  # what the reference adds that the text does not say
    alternative: dict[str, Any] = field(default_factory=dict)  # valid for the text, rejected by the reference
    bool_or_01: tuple[str, ...] = ()  # output keys that may hold booleans or the integers 0/1


@cache
def _load(path: Path) -> dict[str, tuple[Relaxation, ...]]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out: dict[str, tuple[Relaxation, ...]] = {}
    for pid, entries in data.items():
        out[pid] = tuple(
            Relaxation(pid, e.get("find", ""), e.get("replace", ""), e["restriction"], e.get("alternative", {}),
                       tuple(e.get("bool_or_01", ())))
            for e in entries
        )
    return out


def relaxations(problem_id: str, path: Path | None = None) -> tuple[Relaxation, ...]:
    return _load(path or DATA_FILE).get(problem_id, ())


def all_relaxations(path: Path | None = None) -> dict[str, tuple[Relaxation, ...]]:
    return dict(_load(path or DATA_FILE))


def relax_source(problem_id: str, source: str, path: Path | None = None) -> tuple[str, list[str]]:
    """`source` with the listed restrictions lifted, plus a note for each entry whose code was not found
    (a changed reference: it is then graded as written)."""
    notes: list[str] = []
    for r in relaxations(problem_id, path):
        if not r.find:
            continue
        if r.find not in source:
            notes.append(f"restriction not lifted, code not found in the reference: {r.find.strip()[:60]!r}")
            continue
        source = source.replace(r.find, r.replace)
    return source, notes


def bool_or_01_keys(problem_id: str, path: Path | None = None) -> set[str]:
    return {k for r in relaxations(problem_id, path) for k in r.bool_or_01}
