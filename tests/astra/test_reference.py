"""Reference semantics and the comparison rules, on the CPU (needs torch)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from triforge.astra.oracle import compare, same_bits  # noqa: E402
from triforge.astra.task import Tol  # noqa: E402
from triforge.astra.tasks._merge import merge64  # noqa: E402
from triforge.astra.tasks._norm import reference_fused, rmsnorm64  # noqa: E402
from triforge.astra.tasks.per_token_group_quant_fp8 import _quant, compare_fp8  # noqa: E402
from triforge.astra.tasks.rotary_embedding import _rotate  # noqa: E402

TOL = Tol(rel_norm=1e-3, rtol=1e-2, abs_tol=1e-3)


def _merge_inputs(sa, sb, heads_major):
    t, h, d = 2, 3, 4
    g = torch.Generator().manual_seed(0)
    shape = (h, t) if heads_major else (t, h)
    return {"v_a": torch.randn(t, h, d, generator=g), "v_b": torch.randn(t, h, d, generator=g),
            "s_a": torch.tensor(sa, dtype=torch.float32).view(shape), "s_b": torch.tensor(sb, dtype=torch.float32).view(shape)}


def test_merge_lse_plus_inf_is_empty_and_both_empty_is_zero():
    inf = math.inf
    x = _merge_inputs([inf, -inf, 0.5, 1.0, 2.0, -inf], [1.0, 2.0, 0.5, 1.0, 2.0, -inf], heads_major=True)
    r = merge64(x, base2=False, heads_major=True, plus_inf_is_empty=True)
    lse = r["out_lse"]
    assert lse[0, 0] == 1.0 and lse[0, 1] == 2.0  # +inf and -inf both count as an empty part
    assert lse[2, 1] == -inf and torch.all(r["out"][1, 2] == 0)  # both empty: lse -inf, output 0 (heads-major)
    assert abs(lse[1, 0] - (math.log(2) + 0.5)) < 1e-12
    assert torch.allclose(r["out"][0, 1], x["v_a"][0, 1].double() * 0.5 + x["v_b"][0, 1].double() * 0.5)


def test_merge_state_is_base_2_and_token_major():
    x = _merge_inputs([1.0, 3.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0, 0.0, 0.0], heads_major=False)
    r = merge64(x, base2=True, heads_major=False, plus_inf_is_empty=False)
    assert abs(r["out_lse"][0, 0] - 2.0) < 1e-12  # log2(2^1 + 2^1)
    w = 8 / 10  # 2^3 / (2^3 + 2^1)
    assert torch.allclose(r["out"][0, 1], x["v_a"][0, 1].double() * w + x["v_b"][0, 1].double() * (1 - w))


def test_rmsnorm_reference_and_fused_residual_rounding():
    x = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    out = rmsnorm64(x, torch.tensor([1.0, 2.0], dtype=torch.float64), 0.0)
    assert torch.allclose(out, torch.tensor([[3 / math.sqrt(12.5), 8 / math.sqrt(12.5)]], dtype=torch.float64))
    inp = torch.tensor([[1.0, 1e-3]], dtype=torch.bfloat16)
    res = torch.tensor([[256.0, 1.0]], dtype=torch.bfloat16)
    ref = reference_fused({"input": inp, "residual": res, "weight": torch.ones(2, dtype=torch.bfloat16), "eps": 1e-6}, "bf16")
    assert ref["residual"].dtype == torch.bfloat16 and ref["residual"][0, 0].item() == 256.0  # 257 rounds to 256 in bf16


def test_rotary_neox_and_interleaved_pairs():
    x = torch.arange(8, dtype=torch.float64).view(1, 1, 8)
    cos, sin = torch.zeros(1, 1, 4, dtype=torch.float64), torch.ones(1, 1, 4, dtype=torch.float64)
    neox = _rotate(x, cos, sin, True).view(-1).tolist()
    assert neox == [-4, -5, -6, -7, 0, 1, 2, 3]  # (x1, x2) -> (-x2, x1), pairs (i, i + 4)
    inter = _rotate(x, cos, sin, False).view(-1).tolist()
    assert inter == [-1, 0, -3, 2, -5, 4, -7, 6]  # pairs (2i, 2i + 1)


def test_compare_rejects_nan_wrong_inf_and_out_of_tolerance():
    want = torch.tensor([1.0, 2.0, -math.inf, 4.0])
    assert compare("o", want.clone(), want, TOL, False) == []
    got = want.clone()
    got[1] = math.nan
    assert "NaN" in compare("o", got, want, TOL, False)[0]
    got = want.clone()
    got[2] = math.inf
    assert "infinities" in compare("o", got, want, TOL, False)[0]
    got = want.clone()
    got[3] = 4.2
    assert compare("o", got, want, TOL, False)
    got[3] = 4.0 + 1e-3
    assert compare("o", got, want, TOL, False) == []


def test_exact_compare_is_bitwise():
    a = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    b = a.clone()
    b.view(torch.int16)[1] += 1  # one bf16 ulp
    assert compare("r", a, a.clone(), TOL, True) == [] and compare("r", b, a, TOL, True)
    assert same_bits(torch.tensor([0.0]), torch.tensor([-0.0])) == 1


def test_fp8_quant_reference_and_comparison():
    x = torch.tensor([[0.5, -2.0, 1.0, 0.0]], dtype=torch.float32)
    q, s = _quant(x, 4)
    assert s.item() == pytest.approx(2.0 / 448)
    vals = q.view(torch.float8_e4m3fn).float().view(-1).tolist()
    assert vals[1] == -448.0 and vals[3] == 0.0
    assert compare_fp8(q.clone(), q) == []
    off = q.clone()
    off[0, 0] += 1  # one code step: one differing code is allowed
    assert compare_fp8(off, q) == []
    off[0, 2] += 1  # two of four normal codes differ: over max(1, 0.1%)
    assert "differ" in compare_fp8(off, q)[0]
    off[0, 0] += 1  # two steps away
    assert "more than one step" in compare_fp8(off, q)[0]
    nan = q.clone()
    nan[0, 2] = 0x7F
    assert "NaN" in compare_fp8(nan, q)[0]
