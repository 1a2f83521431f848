"""silu_and_mul: out = silu(x[:, :d]) * x[:, d:], silu(x) = x / (1 + exp(-x)), computed in float32."""

from __future__ import annotations

from triforge.astra.tasks._act import make_task, silu64


def _eager(x):
    import torch.nn.functional as F

    return F.silu(x)


def _flashinfer(inputs) -> None:
    import flashinfer

    flashinfer.activation.silu_and_mul(inputs["input"], out=inputs["out"])


TASK = make_task("silu_and_mul", silu64, _eager, 5, __doc__ or "", flashinfer=_flashinfer)
