"""Every tensor a kernel sees, inside a larger allocation with canaries on both sides.

A kernel whose vector stores run past the end of its output (or before its start) writes into memory
the allocator hands to someone else; on a plain tensor that goes unseen. The oracle therefore copies
each tensor into the middle of a buffer `PAD` bytes larger on each side, filled with random bytes
drawn from the input set's seed, and after the run requires every byte outside each view to be as it
was. Reads outside a view stay harmless (they read canary bytes). `PAD` is a multiple of 256, so a
view keeps the 256-byte alignment of the allocation and honest vectorised code takes its aligned path.

The kernels take contiguous tensors (no stride argument), so the gaps the lab can guard are the ones
before and after each tensor; a store past the end of one row lands in the next row, where the
output comparison and the second, perturbed run see it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PAD = 4096


@dataclass
class Guard:
    name: str
    buf: Any       # uint8, PAD + nbytes + PAD
    nbytes: int
    before: Any    # the canary bytes as written
    after: Any


def layout(nbytes: int, pad: int = PAD) -> tuple[int, int, int]:
    """(allocation size, view offset, offset of the trailing canary), in bytes."""
    return nbytes + 2 * pad, pad, pad + nbytes


def embed(inputs: dict[str, Any], gen, pad: int = PAD) -> list[Guard]:
    """Replace every tensor of `inputs` by an identical view inside a canary-guarded allocation."""
    import torch

    guards = []
    for name, t in list(inputs.items()):
        if not isinstance(t, torch.Tensor) or not t.is_contiguous():
            continue
        nbytes = t.numel() * t.element_size()
        total, start, tail = layout(nbytes, pad)
        buf = torch.randint(0, 256, (total,), dtype=torch.uint8, device=t.device, generator=gen)
        view = buf[start:tail].view(t.dtype).view(t.shape)
        view.copy_(t)
        inputs[name] = view
        guards.append(Guard(name, buf, nbytes, buf[:start].clone(), buf[tail:].clone()))
    return guards


def describe(name: str, before: list[int], after: list[int], pad: int = PAD) -> str:
    """One line naming the bytes written outside `name`'s view: `before` holds offsets into the leading
    canary, `after` offsets into the trailing one."""
    parts = []
    if before:
        parts.append(f"{len(before)} bytes before its start (nearest at -{pad - max(before)})")
    if after:
        parts.append(f"{len(after)} bytes after its end (first at +{min(after)})")
    return f"{name}: written outside its view: " + ", ".join(parts)


def violations(guards: list[Guard], pad: int = PAD) -> list[str]:
    """A reason for every tensor whose canaries changed."""
    reasons = []
    for g in guards:
        tail = pad + g.nbytes
        before = (g.buf[:pad] != g.before).nonzero().view(-1).tolist()
        after = (g.buf[tail:] != g.after).nonzero().view(-1).tolist()
        if before or after:
            reasons.append(describe(g.name, before, after, pad))
    return reasons
