"""Verifying every timed call: the candidate's output against the baseline's on the same fresh inputs.

The comparison runs on the GPU and leaves one count per call on the device, so checking all calls
costs no synchronization inside the timing loop. The bound is twice the oracle's tolerance (both
kernels are within it of the float64 reference); exact outputs must match bit for bit, fp8 codes
within two e4m3 steps with at most 3% of them differing.
"""

from __future__ import annotations

from typing import Any

from triforge.astra.task import TaskSpec
from triforge.astra.tensor_bits import bits


def violations(task: TaskSpec, name: str, got, want, dtype: str):
    """Device scalar: how many elements of `got` are outside the bound around `want`."""
    import torch

    if name in task.exact:
        return (bits(got) != bits(want)).sum()
    if got.dtype == torch.uint8:
        g = got.view(torch.float8_e4m3fn).float()
        w = want.view(torch.float8_e4m3fn).float()
        mag = torch.minimum(g.abs(), w.abs()).clamp(min=2.0**-6)
        step = torch.ldexp(torch.ones_like(mag), torch.frexp(mag).exponent - 4)
        far = ((g - w).abs() > 2 * step) | torch.isnan(g)
        differ = (g != w).sum()
        many = torch.where(differ > max(1, g.numel() * 3 // 100), differ, torch.zeros_like(differ))
        return far.sum() + many
    tol = task.tol(name, dtype)
    g, w = got.float().reshape(-1), want.float().reshape(-1)
    # an element passes when both are finite and close, when both are the same value (equal infinities),
    # or when both are NaN; fewer passes over the tensors than testing each case apart, since every timed
    # call is checked. `ok` is boolean, so its sum is an exact integer count (a float32 sum is not, past 2^24)
    mag = w.abs()
    scale = mag.nan_to_num(nan=0.0, posinf=0.0).max()
    bound = mag.mul_(2 * tol.rtol).add_(2 * tol.abs_tol * scale + 1e-30)
    ok = (g - w).abs_().le(bound).logical_and_(w.isfinite())
    ok.logical_or_(g == w).logical_or_(g.isnan().logical_and_(w.isnan()))
    return g.numel() - ok.sum()


class CallChecker:
    """`after` callback for `timing.interleaved` with callables [candidate, baseline, ...] sharing each
    round's seed: keeps the candidate's written tensors until the baseline has run on the same inputs."""

    def __init__(self, task: TaskSpec, dtype: str) -> None:
        self.task, self.dtype = task, dtype
        self.kept: dict[int, dict[str, Any]] = {}
        self.counts: list[tuple[int, Any]] = []

    @property
    def calls(self) -> int:
        return len(self.counts)

    def __call__(self, r: int, j: int, inputs: dict[str, Any]) -> None:
        if j == 0:
            self.kept[r] = {k: inputs[k] for k in self.task.written}
        elif j == 1:
            cand = self.kept.pop(r)
            total = None
            for k in self.task.written:
                v = violations(self.task, k, cand[k], inputs[k], self.dtype)
                total = v if total is None else total + v
            self.counts.append((r, total))

    def failures(self) -> list[tuple[int, int]]:
        """(round, elements out of bound) for every call that failed; one synchronization."""
        import torch

        if not self.counts:
            return []
        vals = torch.stack([c.reshape(()).to(torch.int64) for _, c in self.counts]).cpu().tolist()
        return [(r, int(v)) for (r, _), v in zip(self.counts, vals, strict=True) if v]


def replayed_failures(task: TaskSpec, dtype: str, sets: list[dict[str, Any]], make_inputs, base_launch) -> list[int]:
    """Indexes of the graph-replayed input sets whose results (as the last replay left them) differ from the
    baseline's on the same inputs (`make_inputs(i)` makes set i again); one synchronization."""
    import torch

    counts = []
    for i, got in enumerate(sets):
        want = make_inputs(i)
        base_launch(want)
        total = None
        for k in task.written:
            v = violations(task, k, got[k], want[k], dtype)
            total = v if total is None else total + v
        counts.append(total.reshape(()).to(torch.int64))
    if not counts:
        return []
    return [i for i, v in enumerate(torch.stack(counts).cpu().tolist()) if v]
