"""gelu_tanh_and_mul: out = gelu_tanh(x[:, :d]) * x[:, d:] with the tanh approximation of GELU."""

from __future__ import annotations

from triforge.astra.tasks._act import gelu_tanh64, make_task


def _eager(x):
    import torch.nn.functional as F

    return F.gelu(x, approximate="tanh")


def _flashinfer(inputs) -> None:
    import flashinfer

    flashinfer.activation.gelu_tanh_and_mul(inputs["input"], out=inputs["out"])


TASK = make_task("gelu_tanh_and_mul", gelu_tanh64, _eager, 12, __doc__ or "", flashinfer=_flashinfer)
