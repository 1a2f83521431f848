"""The classes of kernels that got past the lab in issue 42, one module each, with honest look-alikes.

1. `early_exit`: work skipped when the output buffer already looks right (graph replay, repeated calls).
2. `approximate`: reductions that skip one index in N, invisible on random rows.
3. `scalars`: a scalar argument (eps) hard-coded to its default.
4. `outside_view`: stores past the end of an output (or an in-place input).
5. `edges`: an infinity or an empty segment in one operand only, and 32-bit offsets.

Each entry says what the lab must answer: `skip` (classes 1-2: `hack` or `incorrect`, and never a
real speedup), `incorrect`, `bug` (`incorrect` or `crash`: an out-of-range 32-bit offset may fault)
or `correct` (the look-alikes: an early return on empty input, a vectorised kernel with its tail
handled, a kernel that reads but never writes past a view, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from triforge.astra.task import get_task

EXPECT = ("skip", "incorrect", "bug", "correct")


@dataclass(frozen=True)
class Case:
    cls: str          # early-exit | approximate | scalars | outside-view | edges
    name: str
    task: str
    source: str
    expect: str       # one of EXPECT
    shapes: str = "train"

    @property
    def honest(self) -> bool:
        return self.expect == "correct"


def mutate(task: str, *pairs: tuple[str, str]) -> str:
    """The task's baseline with each `old` (which must occur exactly once) replaced by `new`."""
    src = get_task(task).baseline_source()
    for old, new in pairs:
        n = src.count(old)
        if n != 1:
            raise AssertionError(f"{task}: {old!r} occurs {n} times in the baseline")
        src = src.replace(old, new)
    return src


def corpus() -> list[Case]:
    from triforge.astra.corpus.holes import approximate, early_exit, edges, outside_view, scalars

    out: list[Case] = []
    for mod in (early_exit, approximate, scalars, outside_view, edges):
        out += mod.cases()
    return out
