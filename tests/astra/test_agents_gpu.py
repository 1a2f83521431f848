"""On the GPU: the optimize loop with scripted replies through the real lab (compile, oracle, timing,
acceptance, final check). Skipped without CUDA."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from astra.conftest import HAS_CUDA

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs an NVIDIA GPU with torch and cuda-python")]


def test_scripted_round_on_the_gpu(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import astra_optimize as bench

    from triforge.astra.agents import GpuPool, KernelOptimizeSettings, Optimizer

    ms = bench.scripted_models(1, 4)
    s = KernelOptimizeSettings("silu_and_mul", bench.BASE, rounds=1, candidates=4, repairs=0, profile=False,
                         models={r: "scripted" for r in ms})
    pool = GpuPool()
    try:
        out = Optimizer(s, ms, pool, tmp_path).run()
    finally:
        pool.close()
    cands = out.results["candidates"]
    verdict = {cid: (c.get("result") or {}).get("verdict") for cid, c in cands.items()}
    assert verdict["r1-k0"] == "correct" and out.best_id == "r1-k0" and out.best_gain > 1.05
    assert verdict["r1-k1"] == "incorrect"
    assert verdict.get("r1-k2") in ("hack", None)  # None: the precheck refused it at hand-in
    assert verdict["r1-k3"] == "compile_error"
    assert out.results["final"]["verdict"] == "correct"
