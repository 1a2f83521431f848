"""Planted variants of every task: faults that must be rejected, rewrites that must pass, hacks to flag.

Faults and most rewrites are source mutations of the task's baseline (each `old` text must occur in
the baseline, so a mutation can never silently plant nothing); structural rewrites are whole files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from triforge.astra.task import all_tasks, get_task


@dataclass(frozen=True)
class Variant:
    task: str
    name: str
    kind: str  # fault | rewrite | hack
    source: str
    rule: str = ""  # hack: the rule that must fire

    @property
    def expect(self) -> str:
        return {"fault": "not correct", "rewrite": "correct", "hack": "hack"}[self.kind]


def mutate(task: str, name: str, kind: str, *pairs: tuple[str, str], all_occurrences: bool = False) -> Variant:
    src = get_task(task).baseline_source()
    for old, new in pairs:
        n = src.count(old)
        if n == 0 or (n > 1 and not all_occurrences):
            raise AssertionError(f"{task}/{name}: {old!r} occurs {n} times in the baseline")
        src = src.replace(old, new)
    return Variant(task, name, kind, src)


def relaunch(task: str, name: str, block: str, grid: str | None = None) -> Variant:
    src = get_task(task).baseline_source()
    src, n = re.subn(r"// @launch block: .*", f"// @launch block: {block}", src)
    assert n == 1, task
    if grid:
        src, n = re.subn(r"// @launch grid: .*", f"// @launch grid: {grid}", src)
        assert n == 1, task
    return Variant(task, name, "rewrite", src)


def all_variants() -> list[Variant]:
    from triforge.astra.corpus.planted import act, hacks, merge, norm, other, rewrites

    out: list[Variant] = []
    for mod in (act, norm, merge, other, rewrites, hacks):
        out += mod.variants()
    return out


def by_task() -> dict[str, list[Variant]]:
    groups: dict[str, list[Variant]] = {t: [] for t in all_tasks()}
    for v in all_variants():
        groups[v.task].append(v)
    return groups
