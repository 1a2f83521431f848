"""The oracle: fresh seeded inputs, poisoned outputs, checksummed inputs, two runs, strict comparison.

Runs inside the worker process (torch; a GPU for the built-in tasks). Every check returns failure
reasons; an empty list means the candidate computed the task's function on that input. Per shape and
dtype the input sets are: random ones, one with special values in every operand, one per operand with
special values in that operand alone, and outlier sets for each reduction (hard_inputs); scalar
arguments vary across them over the task's range. Every tensor sits inside a canary-guarded
allocation (canary), and on the first random set the kernel also meets its own answer, partly
poisoned, in its output buffers (prefill).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from triforge.astra import hard_inputs as hi
from triforge.astra.canary import embed, violations
from triforge.astra.perturb import Perturber
from triforge.astra.prefill import decoy_reasons
from triforge.astra.task import Shape, TaskSpec, Tol, shape_label
from triforge.astra.tensor_bits import poison, same_bits, tensors


@dataclass
class CheckRecord:
    shape: Shape
    dtype: str
    seed: int
    special: bool
    reasons: list[str] = field(default_factory=list)
    kind: str = ""       # what the set holds beyond random values (special in one operand, outliers, ...)
    hack: bool = False   # the failure is evidence of gaming (the kernel skipped work), not a wrong result

    def label(self) -> str:
        kind = self.kind or ("special" if self.special else "random")
        return f"[{shape_label(self.shape)} {self.dtype} seed={self.seed} {kind}]"


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


def _sync_host(inputs: dict[str, Any]) -> None:
    import torch

    if any(v.is_cuda for v in tensors(inputs).values()):
        torch.cuda.synchronize()


def check_once(task: TaskSpec, launch: Callable[[dict[str, Any]], None], sync: Callable[[], None], shape: Shape,
               dtype: str, seed: int, special: bool,
               launch_perturbed: Callable[[dict[str, Any]], None] | None = None,
               inputs: dict[str, Any] | None = None, kind: str = "", decoys: bool = False) -> CheckRecord:
    """One input set (made from `seed`, or `inputs` as given): every tensor moved inside a canary-guarded
    allocation, reference first, then two poisoned runs on identical inputs (the second one under
    perturbed scheduling when `launch_perturbed` is given); with `decoys`, the prefilled-output runs."""
    import torch


    rec = CheckRecord(shape, dtype, seed, special, kind=kind)
    # a copy: the caller's tensors stay as made (the embedded copies are the ones the kernel writes)
    inputs = dict(task.make_inputs(shape, dtype, seed, special) if inputs is None else inputs)
    ref = task.reference(inputs, dtype)
    written = set(task.written)
    first = next(iter(tensors(inputs).values()), None)
    gen = torch.Generator(device=first.device if first is not None else "cpu")
    gen.manual_seed(seed ^ 0x5EED)
    guards = embed(inputs, gen)
    pristine = {k: v.clone() for k, v in tensors(inputs).items()}
    results = []
    for run in range(2):
        for k, v in tensors(inputs).items():
            if k in task.outputs:
                poison(v)
            else:
                v.copy_(pristine[k])
        _sync_host(inputs)
        (launch_perturbed if run == 1 and launch_perturbed is not None else launch)(inputs)
        sync()
        rec.reasons += violations(guards)
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
        if decoys and not rec.reasons:
            rec.reasons += decoy_reasons(task, inputs, results[0], pristine, launch, sync, gen)
            rec.reasons += violations(guards)
            rec.hack = bool(rec.reasons) and rec.reasons[0].startswith("prefilled-output")
    return rec


def input_sets(task: TaskSpec, shape: Shape, dtype: str, seed_of: Callable[[], int], seeds: int,
               counters: dict[str, int]):
    """Yield (seed, special, kind, inputs or None) for every input set of one shape and dtype; scalar
    arguments take the next value of their range per kind of set (`counters` persists across shapes)."""

    def scalars(inputs: dict[str, Any], which: str) -> str:
        n = counters.get(which, 0)
        counters[which] = n + 1
        return hi.vary_scalars(task, inputs, n)

    for _ in range(seeds):
        seed = seed_of()
        inputs = task.make_inputs(shape, dtype, seed, False)
        yield seed, False, " ".join(x for x in ("random", scalars(inputs, "random")) if x), inputs
    seed = seed_of()
    special = task.make_inputs(shape, dtype, seed, True)
    yield seed, True, " ".join(x for x in ("special", scalars(special, "special")) if x), special
    random = task.make_inputs(shape, dtype, seed, False)
    for op in hi.special_operands(task, random, special):
        one = hi.one_operand_special(random, special, op)
        yield seed, True, " ".join(x for x in (f"special in {op!r} alone", scalars(one, "special")) if x), one
    # fp32's tolerance already sees a skipped element on random rows; the 2-byte types need the outliers
    for red, index, background in (hi.reduction_sets(task, shape, special) if dtype != "fp32" else []):
        seed = seed_of()
        inputs = task.make_inputs(shape, dtype, seed, False)
        gen = _generator_like(inputs, seed)
        label = hi.apply_reduction_set(task, shape, inputs, red, index, background, gen)
        yield seed, False, " ".join(x for x in (label, scalars(inputs, "outliers")) if x), inputs


def _generator_like(inputs: dict[str, Any], seed: int):
    import torch

    first = next(iter(tensors(inputs).values()))
    g = torch.Generator(device=first.device)
    g.manual_seed(seed)
    return g


def run_oracle(task: TaskSpec, launcher_for: Callable[..., Callable[[dict[str, Any]], None]],
               sync: Callable[[], None], shapes: list[Shape], base_seed: int, seeds: int = 1,
               stop_at_first: bool = True, dtypes: list[str] | None = None, perturb: bool = True) -> list[CheckRecord]:
    """Every shape x dtype x input set (random, special, special per operand, outliers); stops at the first
    failure by default. `launcher_for(shape, dtype, stream=0)`; with `perturb` the second run of each set is
    under perturbed scheduling."""
    pert = None
    if perturb:

        pert = Perturber(base_seed)
    records = []
    n = 0
    counters: dict[str, int] = {}

    def next_seed() -> int:
        nonlocal n
        n += 1
        return base_seed + 7919 * n

    for shape in shapes:
        for dtype in dtypes or task.dtypes:
            launch = launcher_for(shape, dtype)
            perturbed = None
            if pert is not None:
                def perturbed(inputs, shape=shape, dtype=dtype):
                    pert.launch(lambda stream: launcher_for(shape, dtype, stream), inputs)
            first = True
            for seed, special, kind, inputs in input_sets(task, shape, dtype, next_seed, seeds, counters):
                rec = check_once(task, launch, sync, shape, dtype, seed, special, launch_perturbed=perturbed,
                                 inputs=inputs, kind=kind, decoys=first)
                first = False
                records.append(rec)
                if rec.reasons and stop_at_first:
                    return records
    return records
