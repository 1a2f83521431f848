"""The RMSNorm family: rmsnorm and fused_add_rmsnorm (one row of `hidden` values per token)."""

from __future__ import annotations

from typing import Any

from triforge.astra.tasks._common import cross, empty, f64, generator, plant_specials, randn, tdtype

EPS = 1e-6
# eps across the oracle's input sets: from negligible to dominating mean(x^2) of a random row
EPS_RANGE = (1e-6, 1e-5, 1e-3, 0.1, 1.0)
TRAIN = [dict(num_tokens=1, hidden=4096), dict(num_tokens=7, hidden=5120), dict(num_tokens=16, hidden=8192),
         dict(num_tokens=512, hidden=4096), dict(num_tokens=2048, hidden=5120)]
HELDOUT = [dict(num_tokens=8192, hidden=4096), dict(num_tokens=6144, hidden=8192), dict(num_tokens=3, hidden=5120),
           dict(num_tokens=1024, hidden=8192)]
FUZZ = cross(num_tokens=[1, 2, 9], hidden=[33, 1001, 4103, 12345])
TIMING = [dict(num_tokens=4096, hidden=8192), dict(num_tokens=1024, hidden=4096), dict(num_tokens=16, hidden=4096)]


def make_inputs(shape: dict[str, int], dtype: str, seed: int, special: bool = False, fused: bool = False) -> dict[str, Any]:
    t, h = shape["num_tokens"], shape["hidden"]
    gen = generator(seed)
    x = randn((t, h), dtype, gen)
    w = (randn((h,), "fp32", gen, scale=0.2) + 1.0).to(tdtype(dtype))
    out: dict[str, Any] = {"input": x, "weight": w, "hidden": h, "eps": EPS}
    if fused:
        out["residual"] = randn((t, h), dtype, gen)
    else:
        out["out"] = empty((t, h), dtype)
    if special:  # in every operand: the input, the residual and the weight
        plant_specials(x, dtype, gen)
        plant_specials(w, dtype, gen)
        if fused:
            plant_specials(out["residual"], dtype, gen)
    return out


def rmsnorm64(x, w, eps: float):
    return x * (x.pow(2).mean(dim=-1, keepdim=True) + eps).rsqrt() * w


def rmsnorm_eager(x, w, eps: float):
    import torch

    xf = x.float()
    var = xf.pow(2).mean(dim=-1, keepdim=True)
    return (xf * torch.rsqrt(var + eps)).to(x.dtype) * w


def norm_bytes(shape: dict[str, int], elem: int, fused: bool) -> int:
    t, h = shape["num_tokens"], shape["hidden"]
    return (t * h * (4 if fused else 2) + h) * elem


def reference_fused(inputs: dict[str, Any], dtype: str) -> dict[str, Any]:
    # residual is defined as the float32 sum rounded to the dtype, compared bit for bit.
    r = (inputs["input"].float() + inputs["residual"].float()).to(inputs["input"].dtype)
    return {"residual": r, "input": rmsnorm64(f64(r), f64(inputs["weight"]), inputs["eps"])}


