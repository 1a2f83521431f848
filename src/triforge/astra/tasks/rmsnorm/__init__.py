"""rmsnorm: out = x / sqrt(mean(x^2) + eps) * weight, per token row; sum of squares in float32 or better."""

from __future__ import annotations

from triforge.astra.task import ELEM_SIZE, Param, Reduction, TaskSpec
from triforge.astra.tasks._common import f64
from triforge.astra.tasks._norm import (
    EPS_RANGE,
    FUZZ,
    HELDOUT,
    TIMING,
    TRAIN,
    make_inputs,
    norm_bytes,
    rmsnorm64,
    rmsnorm_eager,
)


def _reference(inputs, dtype):
    return {"out": rmsnorm64(f64(inputs["input"]), f64(inputs["weight"]), inputs["eps"])}


def _eager(inputs) -> None:
    inputs["out"].copy_(rmsnorm_eager(inputs["input"], inputs["weight"], inputs["eps"]))


def _flashinfer(inputs) -> None:
    import flashinfer

    flashinfer.norm.rmsnorm(inputs["input"], inputs["weight"], eps=inputs["eps"], out=inputs["out"])


TASK = TaskSpec(
    name="rmsnorm",
    entry="rmsnorm_kernel",
    description=__doc__ or "",
    params=[Param("out", "ptr"), Param("input", "ptr"), Param("weight", "ptr"), Param("hidden", "i32"), Param("eps", "f32")],
    outputs=["out"],
    inplace=[],
    dtypes=("bf16", "fp16", "fp32"),
    train=TRAIN, heldout=HELDOUT, fuzz=FUZZ, timing=TIMING,
    make_inputs=make_inputs,
    reference=_reference,
    eager=_eager,
    min_bytes=lambda s, dt: norm_bytes(s, ELEM_SIZE[dt], fused=False),
    flops=lambda s: 4 * s["num_tokens"] * s["hidden"],
    default_launch={"grid": "num_tokens", "block": "min(hidden, 1024)"},
    flashinfer=_flashinfer,
    scalars={"eps": EPS_RANGE},
    reductions=(Reduction("input", "hidden", "sumsq"),),
)
