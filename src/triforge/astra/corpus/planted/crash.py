"""Kernels that crash or hang: each must give verdict `crash`, and the next check a fresh worker."""

from __future__ import annotations

from triforge.astra.task import get_task


def _silu(body_old: str, body_new: str) -> str:
    src = get_task("silu_and_mul").baseline_source()
    assert src.count(body_old) == 1, body_old
    return src.replace(body_old, body_new)


ILLEGAL_ADDRESS = _silu("o[i] = from_float<T>(silu(a) * b);", "o[i - (1LL << 40)] = from_float<T>(silu(a) * b);")
HANG = _silu("for (int i = threadIdx.x; i < d; i += blockDim.x) {",
             "for (int i = threadIdx.x; i < d; i += (d > 0 ? 0 : 1)) {")
TRAP = _silu("o[i] = from_float<T>(silu(a) * b);", "if (i == d - 1) __trap();\n    o[i] = from_float<T>(silu(a) * b);")

# name -> (task, source, watchdog seconds)
CRASHES: dict[str, tuple[str, str, float]] = {
    "illegal-address": ("silu_and_mul", ILLEGAL_ADDRESS, 120.0),
    "hang": ("silu_and_mul", HANG, 20.0),
    "trap": ("silu_and_mul", TRAP, 120.0),
}
