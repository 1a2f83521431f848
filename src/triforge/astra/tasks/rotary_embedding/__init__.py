"""rotary_embedding: rotate query and key in place by the cos/sin row of each token's position.
cos_sin_cache[pos] = [cos(0..rot_dim/2), sin(0..rot_dim/2)]; is_neox=1 pairs (i, i + rot_dim/2),
is_neox=0 (GPT-J, interleaved) pairs (2i, 2i+1). Here rot_dim = head_size."""

from __future__ import annotations

from typing import Any

from triforge.astra.task import ELEM_SIZE, Param, TaskSpec
from triforge.astra.tasks._common import f64, generator, plant_specials, randn, tdtype

MAX_POS = 4096


def _s(t, h, kv, d, neox):
    return dict(num_tokens=t, num_heads=h, num_kv_heads=kv, head_size=d, is_neox=neox)


TRAIN = [_s(1, 32, 32, 128, 1), _s(16, 32, 32, 128, 0), _s(512, 40, 40, 128, 1), _s(2048, 64, 8, 128, 0),
         _s(7, 64, 8, 128, 1)]
HELDOUT = [_s(8192, 32, 32, 128, 1), _s(4096, 64, 8, 128, 0), _s(3, 40, 40, 128, 0), _s(1024, 64, 8, 128, 1)]
FUZZ = [_s(t, h, kv, d, neox) for t in (1, 5) for h, kv in ((3, 1), (2, 2)) for d in (36, 64, 100) for neox in (0, 1)]
TIMING = [_s(4096, 32, 32, 128, 1), _s(1024, 32, 32, 128, 1), _s(16, 32, 32, 128, 1)]


def make_inputs(shape: dict[str, int], dtype: str, seed: int, special: bool = False) -> dict[str, Any]:
    import torch

    t, h, kv, d = shape["num_tokens"], shape["num_heads"], shape["num_kv_heads"], shape["head_size"]
    gen = generator(seed)
    pos = torch.randint(0, MAX_POS, (t,), device="cuda", generator=gen, dtype=torch.int64)
    pos[0] = MAX_POS - 1
    if t > 1:
        pos[1] = 0
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))
    freqs = torch.arange(MAX_POS, device="cuda", dtype=torch.float32)[:, None] * inv_freq[None, :]
    cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1).to(tdtype(dtype))
    q, k = randn((t, h * d), dtype, gen), randn((t, kv * d), dtype, gen)
    if special:  # in both rotated operands
        plant_specials(q, dtype, gen)
        plant_specials(k, dtype, gen)
    return {"positions": pos, "query": q, "key": k, "cos_sin_cache": cache, "num_heads": h, "num_kv_heads": kv,
            "head_size": d, "rot_dim": d, "is_neox": shape["is_neox"]}


def _rotate(x, cos, sin, neox: bool):
    import torch

    e = cos.shape[-1]
    if neox:
        x1, x2 = x[..., :e], x[..., e: 2 * e]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)


def _apply(inputs: dict[str, Any], cast) -> dict[str, Any]:
    d, neox = inputs["head_size"], bool(inputs["is_neox"])
    cs = cast(inputs["cos_sin_cache"])[inputs["positions"]]
    cos, sin = cs[:, None, : d // 2], cs[:, None, d // 2:]
    out = {}
    for name in ("query", "key"):
        x = cast(inputs[name])
        out[name] = _rotate(x.view(x.shape[0], -1, d), cos, sin, neox).reshape(x.shape)
    return out


def _reference(inputs, dtype):
    return _apply(inputs, f64)


def _eager(inputs) -> None:
    res = _apply(inputs, lambda t: t.float())
    inputs["query"].copy_(res["query"])
    inputs["key"].copy_(res["key"])


def _bytes(s, dt):
    t, d = s["num_tokens"], s["head_size"]
    return t * (2 * (s["num_heads"] + s["num_kv_heads"]) * d + d) * ELEM_SIZE[dt] + 8 * t


TASK = TaskSpec(
    name="rotary_embedding",
    entry="rotary_embedding_kernel",
    description=__doc__ or "",
    params=[Param("positions", "ptr"), Param("query", "ptr"), Param("key", "ptr"), Param("cos_sin_cache", "ptr"),
            Param("num_heads", "i32"), Param("num_kv_heads", "i32"), Param("head_size", "i32"), Param("rot_dim", "i32"),
            Param("is_neox", "i32")],
    outputs=[],
    inplace=["query", "key"],
    dtypes=("bf16", "fp16", "fp32"),
    train=TRAIN, heldout=HELDOUT, fuzz=FUZZ, timing=TIMING,
    make_inputs=make_inputs,
    reference=_reference,
    eager=_eager,
    min_bytes=_bytes,
    flops=lambda s: 3 * s["num_tokens"] * (s["num_heads"] + s["num_kv_heads"]) * s["head_size"],
    default_launch={"grid": "num_tokens", "block": "min(num_heads * head_size // 2, 512)"},
)
