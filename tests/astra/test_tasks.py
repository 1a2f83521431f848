"""Task definitions: names, shape sets, costs, planted coverage, and nvcc compile checks of the baselines."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from triforge.astra.compile import instantiate, nvcc_check
from triforge.astra.corpus.planted.variants import by_task
from triforge.astra.task import CTYPE, all_tasks, get_task

PAPER = {"merge_attn_states_lse", "fused_add_rmsnorm", "silu_and_mul"}


def test_paper_tasks_and_five_more():
    names = set(all_tasks())
    assert PAPER <= names and len(names - PAPER) >= 5


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_shape_sets(name):
    t = get_task(name)
    tokens = [s["num_tokens"] for s in t.train]
    assert min(tokens) <= 16 and max(tokens) >= 512, "train needs decode and prefill shapes"
    assert not [s for s in t.heldout if s in t.train + t.timing], "heldout shapes must not be visible in train or timing"
    assert max(s["num_tokens"] for s in t.heldout) >= 4096
    assert t.fuzz and all(t.min_bytes(s, "bf16") > 0 and t.flops(s) > 0 for s in t.train + t.fuzz + t.heldout)
    assert len(t.shapes("all")) == len(t.train) + len(t.fuzz) + len(t.timing) + len(t.heldout)
    # the oracle checks the timing shapes, so a bug there is `incorrect` and never mistaken for a hack
    assert all(s in t.shapes("train") for s in t.timing)
    assert t.dtypes == ("bf16", "fp16", "fp32")
    assert set(t.written) and not set(t.outputs) & set(t.inplace)
    assert {p.name for p in t.params} >= set(t.written)


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_fuzz_crosses_one_token_with_sizes_off_the_vector_width(name):
    t = get_task(name)
    size = {"d", "hidden", "head_dim", "head_size"} & set(t.fuzz[0])
    singles = [s for s in t.fuzz if s["num_tokens"] == 1]
    assert singles, "a single-token shape"
    if name != "per_token_group_quant_fp8":  # its groups are whole multiples by definition
        key = size.pop()
        assert any(s[key] % 8 for s in singles), "one token with a size that is not a multiple of 8 elements"
    assert len({s["num_tokens"] for s in t.fuzz}) >= 2 and len(t.fuzz) >= 12


def test_fuzz_has_odd_tails():
    odd = {"silu_and_mul": "d", "gelu_tanh_and_mul": "d", "rmsnorm": "hidden", "fused_add_rmsnorm": "hidden"}
    for name, key in odd.items():
        assert any(s[key] % 8 for s in get_task(name).fuzz), name


def test_unknown_task_and_shape_set_are_user_errors():
    from triforge.core.errors import UserError

    with pytest.raises(UserError, match="known"):
        get_task("nope")
    with pytest.raises(UserError):
        get_task("rmsnorm").shapes("visible")


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_planted_coverage(name):
    vs = by_task()[name]
    assert sum(v.kind == "fault" for v in vs) >= 10
    assert sum(v.kind == "rewrite" for v in vs) >= 5
    assert len({v.name for v in vs}) == len(vs)
    for v in vs:
        assert v.source != get_task(name).baseline_source() or v.name.startswith("block"), v.name


NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_baseline_compiles_with_nvcc(name):
    t = get_task(name)
    with tempfile.TemporaryDirectory() as td:
        r = nvcc_check(instantiate(t.baseline_source(), t.entry, [CTYPE[d] for d in t.dtypes]), Path(td), nvcc=NVCC)
        assert r.ok, r.stderr[-2000:]
        ptx = (Path(td) / "kernel.ptx").read_text()
    assert ptx.count(".entry") == len(t.dtypes) and ".target sm_90" in ptx


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_broken_kernel_fails_nvcc():
    with tempfile.TemporaryDirectory() as td:
        r = nvcc_check("__global__ void k(float* o) { o[0] = undefined_name; }", Path(td), nvcc=NVCC)
    assert not r.ok and "undefined_name" in r.stderr
