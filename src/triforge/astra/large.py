"""Shapes past 2^31 elements, where 32-bit index arithmetic overflows, checked on sampled rows.

Final verification always runs it; `check` on the train shapes runs it when the device has the
memory (`wanted`).

A float64 reference of a 4-billion-element tensor would need tens of GB, so the candidate runs on the
whole tensor and its output is compared with the reference on a sample of token rows: the first and
last rows, the rows around each multiple of 2^31 elements, and random ones. Rows are sliced from
every tensor whose first dimension is the token count (or, for a heads-major LSE, whose second is).
"""

from __future__ import annotations

import random

from triforge.astra.oracle import compare
from triforge.astra.task import Shape, TaskSpec, shape_label
from triforge.astra.tensor_bits import poison, tensors

LIMIT = 1 << 31


def large_shape(task: TaskSpec) -> Shape:
    """The task's largest timing shape with enough tokens that its biggest tensor exceeds 2^31 elements."""
    import torch

    base = dict(max(task.timing, key=lambda s: task.min_bytes(s, "bf16")))
    probe = task.make_inputs({**base, "num_tokens": 2}, "bf16", 1)
    per_token = max(v.numel() // 2 for v in probe.values() if isinstance(v, torch.Tensor) and v.dim() >= 1
                    and v.shape[0] == 2)
    base["num_tokens"] = LIMIT // per_token + 2
    return base


def bytes_needed(task: TaskSpec, shape: Shape) -> int:
    """Device memory one large check takes: every tensor in bf16, plus the float32 temporary of the
    biggest one while its random values are drawn, plus a margin."""
    import torch

    probe = task.make_inputs({**shape, "num_tokens": 2}, "bf16", 1)
    sizes = [v.numel() // 2 * v.element_size() for v in probe.values()
             if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == 2]
    tokens = shape["num_tokens"]
    return tokens * (sum(sizes) + 2 * max(sizes, default=0)) + (1 << 30)


def wanted(task: TaskSpec, shapes: str) -> bool:
    """Final verification (`heldout`, `all`) always runs the shape past 2^31 elements; a plain check
    (`train`) runs it too when the device has the free memory for it."""
    if shapes in ("heldout", "all"):
        return True
    if shapes != "train":
        return False
    import torch

    free, _total = torch.cuda.mem_get_info()
    return free >= bytes_needed(task, large_shape(task))


def _rows(t, idx, tokens: int):
    if t.dim() >= 1 and t.shape[0] == tokens:
        return t[idx]
    if t.dim() == 2 and t.shape[1] == tokens:
        return t[:, idx]
    return t


def sample_rows(tokens: int, per_token: int, seed: int, k: int = 24) -> list[int]:
    rows = {0, tokens - 1}
    for m in range(1, tokens * per_token // LIMIT + 1):
        r = m * LIMIT // per_token
        rows |= {max(0, r - 1), min(tokens - 1, r), min(tokens - 1, r + 1)}
    rng = random.Random(seed)
    rows |= {rng.randrange(tokens) for _ in range(k)}
    return sorted(rows)


def check_large(task: TaskSpec, launch, sync, seed: int) -> tuple[str, list[str]]:
    """(label, failure reasons) for one run of the candidate on the task's large shape, bf16."""
    import torch

    shape = large_shape(task)
    tokens = shape["num_tokens"]
    inputs = task.make_inputs(shape, "bf16", seed)
    per_token = max(v.numel() // tokens for v in tensors(inputs).values() if v.dim() >= 1 and v.shape[0] == tokens)
    idx = torch.tensor(sample_rows(tokens, per_token, seed), device="cuda")
    for k in task.outputs:
        poison(inputs[k])
    before = {k: (_rows(v, idx, tokens).clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    torch.cuda.synchronize()
    launch(inputs)
    sync()
    ref = task.reference(before, "bf16")
    reasons: list[str] = []
    for k in task.written:
        got = _rows(inputs[k], idx, tokens)
        cmp = task.compare.get(k)
        reasons += cmp(got, ref[k]) if cmp else compare(k, got, ref[k], task.tol(k, "bf16"), k in task.exact)
    label = f"[{shape_label(shape)} bf16 seed={seed} sampled rows, >= 2^31 elements]"
    del inputs, before
    torch.cuda.empty_cache()
    return label, reasons
