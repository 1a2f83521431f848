"""Does the kernel skip work when its output buffer already looks right?

A kernel that checks a few positions of its output and returns when they already hold the answer
computes nothing when a call repeats (graph replay, back-to-back calls on the same buffers). An honest
kernel's output never depends on what its output buffer held before. The oracle therefore runs the
kernel again with every output pre-filled with the kernel's own answer except a few poisoned
positions (decoys): a sparse random 1%, one position per row, everything but the ends of each row,
everything but a random tenth. Whatever positions a skipping kernel inspects, under one of these it
sees the answer and leaves poisoned values behind; every decoy run must reproduce the answer bit for
bit (in-place tensors are inputs too, and are restored instead).
"""

from __future__ import annotations

from typing import Any

from triforge.astra.tensor_bits import poison, same_bits, tensors

DECOYS = ("sparse", "one-per-row", "all-but-ends", "all-but-tenth")


def decoy_mask(kind: str, rows: int, cols: int, gen):
    """Boolean [rows, cols] (on the generator's device): True where the pre-filled answer is poisoned."""
    import torch

    dev = gen.device
    if kind == "sparse":
        mask = torch.rand((rows, cols), generator=gen, device=dev) < 0.01
    elif kind == "one-per-row":
        mask = torch.zeros((rows, cols), dtype=torch.bool, device=dev)
        pick = torch.randint(0, cols, (rows,), generator=gen, device=dev)
        mask[torch.arange(rows, device=dev), pick] = True
    elif kind == "all-but-ends":
        mask = torch.ones((rows, cols), dtype=torch.bool, device=dev)
        mask[:, 0] = False
        mask[:, -1] = False
        mask[0, :] = False
        mask[-1, :] = False
    elif kind == "all-but-tenth":
        mask = torch.rand((rows, cols), generator=gen, device=dev) >= 0.1
    else:
        raise ValueError(f"unknown decoy {kind!r}")
    if not bool(mask.any()):  # a decoy with nothing poisoned tells nothing: poison the middle element
        mask.view(-1)[(rows * cols) // 2] = True
    return mask


def rows_cols(t) -> tuple[int, int]:
    if t.dim() == 0:
        return 1, 1
    if t.dim() == 1:
        return 1, t.shape[0]
    return t.shape[0], t.numel() // t.shape[0]


def prefill(t, answer, mask) -> None:
    """`t` := `answer` with the masked elements poisoned."""

    t.copy_(answer)
    rows, cols = rows_cols(t)
    view = t.view(rows, cols)
    bad = view[mask].clone()
    poison(bad)
    view[mask] = bad


def decoy_reasons(task, inputs: dict[str, Any], answers: dict[str, Any], pristine: dict[str, Any], launch, sync,
                  gen) -> list[str]:
    """Run each decoy; a reason for the first decoy after which an output differs from the kernel's own answer."""
    import torch


    outs = [k for k in task.outputs if isinstance(inputs.get(k), torch.Tensor) and inputs[k].numel()]
    if not outs:
        return []
    for kind in DECOYS:
        masks = {}
        for k in outs:
            masks[k] = decoy_mask(kind, *rows_cols(inputs[k]), gen)
            prefill(inputs[k], answers[k], masks[k])
        for k, v in tensors(inputs).items():
            if k not in task.outputs:
                v.copy_(pristine[k])
        torch.cuda.synchronize() if inputs[outs[0]].is_cuda else None
        launch(inputs)
        sync()
        for k in outs:
            if n := same_bits(inputs[k], answers[k]):
                poisoned = int(masks[k].sum())
                return [f"prefilled-output: with {k!r} pre-filled with the kernel's own answer except {poisoned} "
                        f"poisoned elements ({kind} decoy), {n} elements differ from that answer afterwards: the "
                        f"kernel skips work when its output buffer already looks right"]
    return []
