"""The gated-activation family: out[t, :] = act(x[t, :d]) * x[t, d:2d]."""

from __future__ import annotations

import math
from typing import Any

from triforge.astra.task import ELEM_SIZE, Param, TaskSpec
from triforge.astra.tasks._common import cross, empty, f64, generator, plant_specials, randn

TRAIN = [dict(num_tokens=1, d=11008), dict(num_tokens=7, d=13824), dict(num_tokens=16, d=28672),
         dict(num_tokens=512, d=11008), dict(num_tokens=1024, d=13824)]
HELDOUT = [dict(num_tokens=8192, d=11008), dict(num_tokens=2048, d=28672), dict(num_tokens=3, d=13824),
           dict(num_tokens=4096, d=13824)]
# one token, a few, a block's worth plus one; sizes below, around and above a vector and a block, none a
# multiple of the 16-byte vector width except 4096
FUZZ = cross(num_tokens=[1, 3, 33], d=[7, 129, 1001, 4103, 4096])
TIMING = [dict(num_tokens=4096, d=11008), dict(num_tokens=1024, d=11008), dict(num_tokens=16, d=11008)]


def make_inputs(shape: dict[str, int], dtype: str, seed: int, special: bool = False) -> dict[str, Any]:
    t, d = shape["num_tokens"], shape["d"]
    gen = generator(seed)
    x = randn((t, 2 * d), dtype, gen, scale=2.0)
    if special:
        plant_specials(x, dtype, gen)
    return {"input": x, "out": empty((t, d), dtype), "d": d}


def silu64(x):
    return x / (1.0 + (-x).exp())


def gelu_tanh64(x):
    return 0.5 * x * (1.0 + (math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))).tanh())


def make_task(name: str, act64, act_eager, flops_per_elem: int, description: str, flashinfer=None) -> TaskSpec:
    def reference(inputs: dict[str, Any], dtype: str) -> dict[str, Any]:
        x = f64(inputs["input"])
        d = inputs["d"]
        return {"out": act64(x[:, :d]) * x[:, d:]}

    def eager(inputs: dict[str, Any]) -> None:
        x, d = inputs["input"], inputs["d"]
        inputs["out"].copy_(act_eager(x[:, :d]) * x[:, d:])

    return TaskSpec(
        name=name,
        entry=f"{name}_kernel",
        description=description,
        params=[Param("out", "ptr"), Param("input", "ptr"), Param("d", "i32")],
        outputs=["out"],
        inplace=[],
        dtypes=("bf16", "fp16", "fp32"),
        train=TRAIN, heldout=HELDOUT, fuzz=FUZZ, timing=TIMING,
        make_inputs=make_inputs,
        reference=reference,
        eager=eager,
        min_bytes=lambda s, dt: 3 * s["num_tokens"] * s["d"] * ELEM_SIZE[dt],
        flops=lambda s: flops_per_elem * s["num_tokens"] * s["d"],
        default_launch={"grid": "num_tokens", "block": "min(d, 1024)"},
        flashinfer=flashinfer,
    )

