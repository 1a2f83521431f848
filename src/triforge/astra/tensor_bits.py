"""Tensors as the oracle handles them: picking them out of a task's inputs, poisoning outputs, comparing bits.

The lowest of the lab's modules (torch is imported on use, so it loads on a machine without a GPU).
"""

from __future__ import annotations

from typing import Any


def tensors(inputs: dict[str, Any]) -> dict[str, Any]:
    import torch

    return {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def poison(t) -> None:
    """NaN for float outputs, 0x7F (NaN in e4m3fn) for byte outputs, a sentinel for integers."""
    import torch

    if t.is_floating_point():
        t.fill_(float("nan"))
    elif t.dtype == torch.uint8:
        t.fill_(0x7F)
    else:
        t.fill_(-0x5A5A5A5)


def bits(t):
    import torch

    if t.element_size() == 8:
        return t.view(torch.int64)
    if t.element_size() == 4:
        return t.view(torch.int32)
    if t.element_size() == 2:
        return t.view(torch.int16)
    return t.view(torch.uint8)


def same_bits(a, b) -> int:
    """Number of elements whose bit patterns differ."""
    return int((bits(a) != bits(b)).sum())
