"""Merging two partial attention results by their log-sum-exp (natural log or base 2)."""

from __future__ import annotations

import math
from typing import Any

from triforge.astra.task import ELEM_SIZE, Param, TaskSpec, Tol
from triforge.astra.tasks._common import cross, empty, f64, generator, plant_specials, randn

TRAIN = [dict(num_tokens=1, num_heads=32, head_dim=128), dict(num_tokens=16, num_heads=40, head_dim=128),
         dict(num_tokens=512, num_heads=32, head_dim=128), dict(num_tokens=2048, num_heads=64, head_dim=128),
         dict(num_tokens=7, num_heads=8, head_dim=64)]
HELDOUT = [dict(num_tokens=8192, num_heads=32, head_dim=128), dict(num_tokens=4096, num_heads=64, head_dim=128),
           dict(num_tokens=3, num_heads=40, head_dim=128)]
FUZZ = cross(num_tokens=[1, 5], num_heads=[3, 7], head_dim=[33, 72, 100])
TIMING = [dict(num_tokens=4096, num_heads=32, head_dim=128), dict(num_tokens=1024, num_heads=32, head_dim=128),
          dict(num_tokens=16, num_heads=32, head_dim=128)]
LSE_TOL = Tol(rel_norm=1e-5, rtol=1e-5, abs_tol=2e-6)
PARAMS = [Param("out", "ptr"), Param("out_lse", "ptr"), Param("v_a", "ptr"), Param("s_a", "ptr"), Param("v_b", "ptr"),
          Param("s_b", "ptr"), Param("num_tokens", "i32"), Param("num_heads", "i32"), Param("head_dim", "i32")]


def make_inputs(shape: dict[str, int], dtype: str, seed: int, special: bool = False, heads_major: bool = True,
                plus_inf: bool = True) -> dict[str, Any]:
    import torch

    t, h, d = shape["num_tokens"], shape["num_heads"], shape["head_dim"]
    gen = generator(seed)
    va, vb = randn((t, h, d), dtype, gen), randn((t, h, d), dtype, gen)
    lse_shape = (h, t) if heads_major else (t, h)
    sa, sb = randn(lse_shape, "fp32", gen, scale=4.0), randn(lse_shape, "fp32", gen, scale=4.0)
    if special:
        plant_specials(va, dtype, gen)
        plant_specials(vb, dtype, gen)
        n = sa.numel()
        fa, fb = sa.view(-1), sb.view(-1)
        fa[0] = -math.inf                      # empty first part
        fb[min(1, n - 1)] = -math.inf          # empty second part
        if n > 3:
            fa[2] = fb[2] = -math.inf          # both empty: output 0, lse -inf
        if plus_inf and n > 4:
            fa[3] = math.inf                   # +inf is treated as -inf, in either part (the other finite)
        if plus_inf and n > 5:
            fb[4] = math.inf
        for f in (fa, fb):                     # large magnitudes: exp or exp2 without the max overflows
            idx = torch.randint(0, n, (max(1, n // 16),), device="cuda", generator=gen)
            f[idx] += 200.0
    return {"v_a": va, "s_a": sa, "v_b": vb, "s_b": sb, "out": empty((t, h, d), dtype),
            "out_lse": torch.empty(lse_shape, device="cuda", dtype=torch.float32),
            "num_tokens": t, "num_heads": h, "head_dim": d}


def merge64(inputs: dict[str, Any], base2: bool, heads_major: bool, plus_inf_is_empty: bool) -> dict[str, Any]:
    import torch

    sa, sb = f64(inputs["s_a"]), f64(inputs["s_b"])
    if plus_inf_is_empty:
        sa = torch.where(torch.isinf(sa), -math.inf, sa)
        sb = torch.where(torch.isinf(sb), -math.inf, sb)
    m = torch.maximum(sa, sb)
    empty_mask = torch.isneginf(m)
    ms = torch.where(empty_mask, 0.0, m)
    ea = torch.exp2(sa - ms) if base2 else torch.exp(sa - ms)
    eb = torch.exp2(sb - ms) if base2 else torch.exp(sb - ms)
    tot = ea + eb
    lse = (torch.log2(tot) if base2 else torch.log(tot)) + ms
    lse = torch.where(empty_mask, -math.inf, lse)
    wa = torch.where(empty_mask, 0.0, ea / torch.where(empty_mask, 1.0, tot))
    wb = torch.where(empty_mask, 0.0, eb / torch.where(empty_mask, 1.0, tot))
    if heads_major:
        wa, wb = wa.t(), wb.t()
    out = f64(inputs["v_a"]) * wa.unsqueeze(-1) + f64(inputs["v_b"]) * wb.unsqueeze(-1)
    return {"out": out, "out_lse": lse}


def merge_eager(inputs: dict[str, Any], base2: bool, heads_major: bool, plus_inf_is_empty: bool) -> None:
    import torch

    sa, sb = inputs["s_a"], inputs["s_b"]
    if plus_inf_is_empty:
        sa = torch.where(torch.isinf(sa), -math.inf, sa)
        sb = torch.where(torch.isinf(sb), -math.inf, sb)
    m = torch.maximum(sa, sb)
    ms = torch.where(torch.isneginf(m), 0.0, m)
    ea = torch.exp2(sa - ms) if base2 else torch.exp(sa - ms)
    eb = torch.exp2(sb - ms) if base2 else torch.exp(sb - ms)
    tot = ea + eb
    safe = torch.where(tot == 0, 1.0, tot)
    wa, wb = ea / safe, eb / safe
    if heads_major:
        wa, wb = wa.t(), wb.t()
    out = inputs["v_a"].float() * wa.unsqueeze(-1) + inputs["v_b"].float() * wb.unsqueeze(-1)
    inputs["out"].copy_(out)
    inputs["out_lse"].copy_((torch.log2(tot) if base2 else torch.log(tot)) + ms)


def make_task(name: str, base2: bool, heads_major: bool, plus_inf_is_empty: bool, description: str, flashinfer=None) -> TaskSpec:
    from functools import partial

    return TaskSpec(
        name=name,
        entry=f"{name}_kernel",
        description=description,
        params=list(PARAMS),
        outputs=["out", "out_lse"],
        inplace=[],
        dtypes=("bf16", "fp16", "fp32"),
        train=TRAIN, heldout=HELDOUT, fuzz=FUZZ, timing=TIMING,
        make_inputs=partial(make_inputs, heads_major=heads_major, plus_inf=plus_inf_is_empty),
        reference=lambda inputs, dtype: merge64(inputs, base2, heads_major, plus_inf_is_empty),
        eager=partial(merge_eager, base2=base2, heads_major=heads_major, plus_inf_is_empty=plus_inf_is_empty),
        min_bytes=lambda s, dt: s["num_tokens"] * s["num_heads"] * (3 * s["head_dim"] * ELEM_SIZE[dt] + 12),
        flops=lambda s: 4 * s["num_tokens"] * s["num_heads"] * s["head_dim"],
        default_launch={"grid": "num_tokens * num_heads", "block": "head_dim"},
        output_tols={"out_lse": LSE_TOL},
        flashinfer=flashinfer,
    )
