"""fused_add_rmsnorm: residual += input (in place, float32 sum rounded to the dtype, compared exactly),
then input = rmsnorm(residual) * weight (in place)."""

from __future__ import annotations

from functools import partial

from triforge.astra.task import ELEM_SIZE, Param, Reduction, TaskSpec
from triforge.astra.tasks._norm import (
    EPS_RANGE,
    FUZZ,
    HELDOUT,
    TIMING,
    TRAIN,
    make_inputs,
    norm_bytes,
    reference_fused,
    rmsnorm_eager,
)


def _eager(inputs) -> None:
    inputs["residual"].add_(inputs["input"])
    inputs["input"].copy_(rmsnorm_eager(inputs["residual"], inputs["weight"], inputs["eps"]))


def _flashinfer(inputs) -> None:
    import flashinfer

    flashinfer.norm.fused_add_rmsnorm(inputs["input"], inputs["residual"], inputs["weight"], eps=inputs["eps"])


TASK = TaskSpec(
    name="fused_add_rmsnorm",
    entry="fused_add_rmsnorm_kernel",
    description=__doc__ or "",
    params=[Param("input", "ptr"), Param("residual", "ptr"), Param("weight", "ptr"), Param("hidden", "i32"),
            Param("eps", "f32")],
    outputs=[],
    inplace=["input", "residual"],
    exact=("residual",),
    dtypes=("bf16", "fp16", "fp32"),
    train=TRAIN, heldout=HELDOUT, fuzz=FUZZ, timing=TIMING,
    make_inputs=partial(make_inputs, fused=True),
    reference=reference_fused,
    eager=_eager,
    min_bytes=lambda s, dt: norm_bytes(s, ELEM_SIZE[dt], fused=True),
    flops=lambda s: 5 * s["num_tokens"] * s["hidden"],
    default_launch={"grid": "num_tokens", "block": "min(hidden, 1024)"},
    flashinfer=_flashinfer,
    scalars={"eps": EPS_RANGE},
    reductions=(Reduction("input", "hidden", "sumsq", quiet=("residual",)),),
)
