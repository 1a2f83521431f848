"""The oracle: fresh seeded inputs, poisoned outputs, checksummed inputs, two runs, strict comparison.

Runs inside the worker process (needs torch and a GPU). Every check returns failure reasons; an
empty list means the candidate computed the task's function on that input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from triforge.astra.task import Shape, TaskSpec, Tol, shape_label


@dataclass
class CheckRecord:
    shape: Shape
    dtype: str
    seed: int
    special: bool
    reasons: list[str] = field(default_factory=list)

    def label(self) -> str:
        kind = "special" if self.special else "random"
        return f"[{shape_label(self.shape)} {self.dtype} seed={self.seed} {kind}]"


def tensors(inputs: dict[str, Any]) -> dict[str, Any]:
    import torch

    return {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def poison(t) -> None:
    """NaN for float outputs, 0x7F (NaN in e4m3fn) for byte outputs, a sentinel for integers."""
    import torch

    if t.is_floating_point():
        t.fill_(float("nan"))
    elif t.dtype == torch.uint8:
        t.fill_(0x7F)
    else:
        t.fill_(-0x5A5A5A5)


def bits(t):
    import torch

    if t.element_size() == 8:
        return t.view(torch.int64)
    if t.element_size() == 4:
        return t.view(torch.int32)
    if t.element_size() == 2:
        return t.view(torch.int16)
    return t.view(torch.uint8)


def same_bits(a, b) -> int:
    """Number of elements whose bit patterns differ."""
    return int((bits(a) != bits(b)).sum())


def compare(name: str, got, want, tol: Tol, exact: bool) -> list[str]:
    import torch

    if exact:
        n = same_bits(got.contiguous(), want.to(got.dtype).contiguous())
        return [f"{name}: {n} of {got.numel()} elements differ from the exactly defined result"] if n else []
    g, w = got.double().reshape(-1), want.double().reshape(-1)
    reasons = []
    left = torch.isnan(g) & ~torch.isnan(w)
    if left.any():
        i = int(left.nonzero()[0])
        reasons.append(f"{name}: {int(left.sum())} of {g.numel()} elements NaN (never written, or NaN computed); first at {i}")
    winf = torch.isinf(w)
    wrong_inf = (winf & (g != w)) | (torch.isinf(g) & ~winf)
    if wrong_inf.any():
        i = int(wrong_inf.nonzero()[0])
        reasons.append(f"{name}: {int(wrong_inf.sum())} infinities wrong; first at {i}: {g[i].item()} vs {w[i].item()}")
    fin = torch.isfinite(w) & torch.isfinite(g)
    if reasons or not fin.any():
        return reasons
    gf, wf = g[fin], w[fin]
    d = gf - wf
    rel = float(d.norm() / wf.norm().clamp(min=1e-30))
    if rel > tol.rel_norm:
        reasons.append(f"{name}: relative norm error {rel:.3g} > {tol.rel_norm:.1g}")
    bound = tol.abs_tol * float(wf.abs().max()) + tol.rtol * wf.abs()
    bad = d.abs() > bound
    if bad.any():
        i = int(bad.nonzero()[0])
        idx = int(fin.nonzero()[i])
        reasons.append(f"{name}: {int(bad.sum())} of {gf.numel()} elements outside tolerance; worst |err| "
                       f"{float(d.abs().max()):.3g}; first at {idx}: {gf[i].item():.6g} vs {wf[i].item():.6g}")
    return reasons


def check_once(task: TaskSpec, launch: Callable[[dict[str, Any]], None], sync: Callable[[], None], shape: Shape,
               dtype: str, seed: int, special: bool,
               launch_perturbed: Callable[[dict[str, Any]], None] | None = None) -> CheckRecord:
    """One input set: reference first, then two poisoned runs on identical inputs (the second one under
    perturbed scheduling when `launch_perturbed` is given)."""
    import torch

    rec = CheckRecord(shape, dtype, seed, special)
    inputs = task.make_inputs(shape, dtype, seed, special)
    ref = task.reference(inputs, dtype)
    written = set(task.written)
    pristine = {k: v.clone() for k, v in tensors(inputs).items()}
    results = []
    for run in range(2):
        for k, v in tensors(inputs).items():
            if k in task.outputs:
                poison(v)
            else:
                v.copy_(pristine[k])
        torch.cuda.synchronize()
        (launch_perturbed if run == 1 and launch_perturbed is not None else launch)(inputs)
        sync()
        for k, v in tensors(inputs).items():
            if k not in written and (n := same_bits(v, pristine[k])):
                rec.reasons.append(f"input {k!r} modified ({n} elements) but the task does not update it in place")
        results.append({k: inputs[k].clone() for k in task.written})
        if run == 0:
            for k in task.written:
                cmp = task.compare.get(k)
                tol = task.tol(k, dtype)
                rec.reasons += cmp(inputs[k], ref[k]) if cmp else compare(k, inputs[k], ref[k], tol, k in task.exact)
        if rec.reasons:
            return rec
    if not task.nondeterministic:
        for k in task.written:
            if n := same_bits(results[0][k], results[1][k]):
                rec.reasons.append(f"{k}: two runs on the same inputs differ in {n} elements (a race or uninitialized read)")
    return rec


def run_oracle(task: TaskSpec, launcher_for: Callable[..., Callable[[dict[str, Any]], None]],
               sync: Callable[[], None], shapes: list[Shape], base_seed: int, seeds: int = 1,
               stop_at_first: bool = True, dtypes: list[str] | None = None, perturb: bool = True) -> list[CheckRecord]:
    """Every shape x dtype x seed, random inputs then special values; stops at the first failure by default.
    `launcher_for(shape, dtype, stream=0)`; with `perturb` the second run of each set is under perturbed scheduling."""
    from triforge.astra.perturb import Perturber

    pert = Perturber(base_seed) if perturb else None
    records = []
    n = 0
    for shape in shapes:
        for dtype in dtypes or task.dtypes:
            launch = launcher_for(shape, dtype)
            perturbed = None
            if pert is not None:
                def perturbed(inputs, shape=shape, dtype=dtype):
                    pert.launch(lambda stream: launcher_for(shape, dtype, stream), inputs)
            for s in range(seeds + 1):
                n += 1
                rec = check_once(task, launch, sync, shape, dtype, base_seed + 7919 * n, special=(s == seeds),
                                 launch_perturbed=perturbed)
                records.append(rec)
                if rec.reasons and stop_at_first:
                    return records
    return records
