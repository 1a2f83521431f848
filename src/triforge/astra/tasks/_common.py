"""Helpers shared by the task definitions: dtypes, seeded inputs, special values."""

from __future__ import annotations

from typing import Any

TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# Large magnitudes that stay finite through each op in the dtype (fp16 overflows at 65504).
LARGE = {"bf16": 300.0, "fp16": 40.0, "fp32": 300.0}

# LLaMA-like model dimensions: (hidden, intermediate, heads, kv_heads)
LLAMA_7B = (4096, 11008, 32, 32)
LLAMA_13B = (5120, 13824, 40, 40)
LLAMA_70B = (8192, 28672, 64, 8)


def cross(**edges: list) -> list[dict[str, int]]:
    """Every combination of each dimension's edge values (the systematic fuzz set)."""
    import itertools

    keys = list(edges)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(edges[k] for k in keys))]


def tdtype(dtype: str):
    import torch

    return getattr(torch, TORCH_DTYPE[dtype])


def generator(seed: int):
    import torch

    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g


def randn(shape: tuple[int, ...], dtype: str, gen, scale: float = 1.0):
    import torch

    # drawn in the target dtype and scaled in place: a third of the bytes of drawing in float32 and
    # converting, which matters when every timed call gets inputs of its own
    x = torch.randn(shape, device="cuda", dtype=tdtype(dtype), generator=gen)
    return x if scale == 1.0 else x.mul_(scale)


def plant_specials(t, dtype: str, gen) -> None:
    """Rows (first dim) of zeros, tiny and large magnitudes, in place; columns of a 1-row tensor likewise."""
    import torch

    rows = t.shape[0]
    flat = t.view(rows, -1)
    if rows >= 4:
        flat[0].zero_()
        flat[1].mul_(1e-4)
        flat[2].mul_(LARGE[dtype] / 4)
        k = int(torch.randint(3, rows, (1,), device="cuda", generator=gen).item())
        flat[k, ::7].zero_()
    else:
        n = flat.shape[1]
        flat[:, : n // 4].zero_()
        flat[:, n // 4: n // 2].mul_(1e-4)
        flat[:, n // 2: n // 2 + 8].mul_(LARGE[dtype] / 4)


def empty(shape: tuple[int, ...], dtype: str):
    import torch

    return torch.empty(shape, device="cuda", dtype=tdtype(dtype))


def f64(t) -> Any:
    import torch

    return t.to(torch.float64)
