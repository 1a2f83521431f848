"""Input sets random data cannot stand in for: outliers that expose skipped reduction elements, scalar
arguments varied over their range, special values in one operand at a time.

- A reduction that skips one index in N (a sum of squares, an absolute maximum) is off by well under
  the tolerance on random rows, and by up to 2x when the skipped element is the one that dominates.
  `outlier_plan` places a few dominating outliers per row so that, over a shape's sets, some row has an
  outlier at every residue class of every stride from 2 to 256 (positions 0..255 of the row cover them
  all), at both ends of every row, and, where rows are plentiful, at every position; the rows around
  them are sparse (zero) or structured (constant, alternating sign) or faint noise.
- `scalar_value` cycles each scalar argument through the task's range, so a kernel that hard-codes a
  default (eps) meets a value where it matters.
- `one_operand_special`: the special values of one operand with every other operand random (an
  infinity in one part of a merge, the other finite; an empty segment on one side only).

The planning functions are plain Python; the tensor functions work on any torch device.
"""

from __future__ import annotations

from typing import Any

from triforge.astra.task import Reduction, Shape, TaskSpec
from triforge.astra.tensor_bits import bits

MAX_STRIDE = 256
OUTLIER = 8.0
PER_ROW = {"sumsq": 4, "max": 1}  # sumsq: skipping one of 4 equal outliers moves the row's rms by ~13%
BACKGROUNDS = ("zero", "noise", "alternating", "constant")
MAX_SETS = 3


def targets(length: int) -> list[int]:
    """Row positions to cover, most telling first: both ends, then 1..255 (with 0 every residue class of
    every stride up to 256), then the rest of the row in a spread order."""
    head = [0, length - 1] + list(range(1, min(length - 1, MAX_STRIDE)))
    seen = set(head)
    rest = [i for i in range(length) if i not in seen]
    step = 97 if len(rest) % 97 else 89
    spread = [rest[(k * step) % len(rest)] for k in range(len(rest))] if rest else []
    out, done = [], set()
    for i in head + spread:
        if i not in done:
            done.add(i)
            out.append(i)
    return out


def outlier_plan(rows: int, length: int, per_row: int, max_sets: int = MAX_SETS) -> list[list[list[int]]]:
    """plan[set][row] = the outlier positions of that row. Set 0 puts an outlier at the start of every row,
    set 1 at the end; the other slots walk `targets(length)`, as many sets as it takes (at most `max_sets`)."""
    per_row = max(1, min(per_row, length))
    order = targets(length)
    plan: list[list[list[int]]] = []
    cursor = 0
    for s in range(max_sets):
        forced = [0, length - 1][s] if s < 2 else None
        if s >= 2 and cursor >= len(order):
            break
        # rows past the ones it takes to walk the targets repeat the plan (plant_outliers cycles it)
        free = per_row - (forced is not None)
        planned = 1 if free == 0 else min(rows, -(-(len(order) - min(cursor, len(order))) // free) + 1)
        one = []
        for _ in range(max(1, planned)):
            pos = [] if forced is None else [forced]
            while len(pos) < per_row:
                cand = order[cursor % len(order)]
                cursor += 1
                if cand not in pos:
                    pos.append(cand)
                elif len(order) <= len(pos):
                    break
            one.append(pos)
        plan.append(one)
    return plan


def coverage(plan: list[list[list[int]]], length: int) -> set[int]:
    return {p for one in plan for row in one for p in row if 0 <= p < length}


def uncovered_residues(covered: set[int], length: int) -> list[tuple[int, int]]:
    """(stride, residue) pairs, strides 2..256 that fit the row, with no outlier anywhere in their class."""
    missing = []
    for s in range(2, min(MAX_STRIDE, length) + 1):
        hit = {p % s for p in covered}
        missing += [(s, c) for c in range(s) if c not in hit]
    return missing


def plant_outliers(t, length: int, positions: list[list[int]], background: str, gen) -> None:
    """Rows of `t` (viewed as [-1, length]) become the background (every value below OUTLIER / 100) plus
    outliers of magnitude OUTLIER with random signs at the planned positions (row r takes plan row r mod
    len(positions))."""
    import torch

    rows = t.view(-1, length)
    n = rows.shape[0]
    if background == "zero":
        rows.zero_()
    elif background == "noise":
        rows.copy_(torch.randn(rows.shape, generator=gen, device=t.device) * 0.01)
    elif background == "alternating":
        alt = torch.tensor([0.05, -0.05], device=t.device).repeat((length + 1) // 2)[:length]
        rows.copy_(alt.expand(n, length))
    else:
        rows.fill_(0.03)
    k = max((len(p) for p in positions), default=0)
    if k == 0:
        return
    table = torch.tensor([p + [-1] * (k - len(p)) for p in positions], device=t.device)
    r_all = torch.arange(n, device=t.device)
    cols = table[r_all % len(positions)]
    mask = cols >= 0
    r_idx = r_all[:, None].expand(n, k)[mask]
    c_idx = cols[mask]
    sign = torch.randint(0, 2, (int(r_idx.numel()),), generator=gen, device=t.device).float() * 2 - 1
    rows[r_idx, c_idx] = (sign * OUTLIER).to(rows.dtype)


def reduction_sets(task: TaskSpec, shape: Shape, inputs: dict[str, Any]) -> list[tuple[Reduction, int, str]]:
    """(reduction, set index, background) for every adversarial set of this shape."""
    out = []
    for red in task.reductions:
        length = int(shape.get(red.length, inputs.get(red.length, 0)))
        t = inputs.get(red.operand)
        if not length or t is None or t.numel() % length:
            continue
        rows = t.numel() // length
        plan = outlier_plan(rows, length, PER_ROW.get(red.kind, 1))
        out += [(red, s, BACKGROUNDS[s % len(BACKGROUNDS)]) for s in range(len(plan))]
    return out


def apply_reduction_set(task: TaskSpec, shape: Shape, inputs: dict[str, Any], red: Reduction, set_index: int,
                        background: str, gen) -> str:
    """Rewrite `inputs` in place for one adversarial set; returns its label."""
    length = int(shape.get(red.length, inputs.get(red.length, 0)))
    t = inputs[red.operand]
    rows = t.numel() // length
    plan = outlier_plan(rows, length, PER_ROW.get(red.kind, 1))
    plant_outliers(t, length, plan[set_index], background, gen)
    for q in red.quiet:
        if q in inputs:
            plant_outliers(inputs[q], length, [[]], background, gen)
    return f"outliers in {red.operand} ({red.kind}, set {set_index}, {background} rows)"


def scalar_value(task: TaskSpec, name: str, counter: int) -> float:
    values = task.scalars[name]
    return values[counter % len(values)]


def vary_scalars(task: TaskSpec, inputs: dict[str, Any], counter: int) -> str:
    """Set every ranged scalar for input set number `counter`; returns the label part ('' when none)."""
    parts = []
    for name in task.scalars:
        if name in inputs:
            inputs[name] = scalar_value(task, name, counter)
            parts.append(f"{name}={inputs[name]:g}")
    return " ".join(parts)


def special_operands(task: TaskSpec, random: dict[str, Any], special: dict[str, Any]) -> list[str]:
    """The input tensors whose special version differs from the random one (outputs excluded); one-operand
    sets are only worth running when more than one operand has specials."""
    import torch


    names = []
    for k, v in special.items():
        if k in task.outputs or not isinstance(v, torch.Tensor) or not isinstance(random.get(k), torch.Tensor):
            continue
        if v.shape == random[k].shape and bool((bits(v) != bits(random[k])).any()):
            names.append(k)
    return names if len(names) > 1 else []


def one_operand_special(random: dict[str, Any], special: dict[str, Any], operand: str) -> dict[str, Any]:
    out = dict(random)
    out[operand] = special[operand]
    return out
