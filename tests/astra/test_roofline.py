"""The roofline probe's planning without a GPU: grid sizes, the best configuration, and its source compiles."""

from __future__ import annotations

import pytest

from triforge.astra.roofline import CONFIGS, SOURCE, UNROLLS, Config, best, grid_for


def test_grids_cover_the_buffer_in_one_pass_or_fill_every_sm():
    n_vec = (1 << 30) // 16
    assert grid_for(Config(256, 4, 0), n_vec, 132) * 256 * 4 >= n_vec
    assert grid_for(Config(256, 4, 8), n_vec, 132) == 132 * 8
    assert {c.unroll for c in CONFIGS} <= set(UNROLLS) and len({c.label() for c in CONFIGS}) == len(CONFIGS)


def test_the_fastest_configuration_sets_the_ceiling():
    label, gbs = best({"a": [10.0, 11.0, 12.0], "b": [8.0, 9.0, 30.0]}, 9_000_000)
    assert label == "b" and gbs == pytest.approx(9_000_000 / 9e-6 / 1e9)


def test_the_probe_compiles_for_every_unroll():
    pytest.importorskip("cuda.bindings.nvrtc")
    from triforge.astra.compile import nvrtc_compile

    names = [f"stream_{k}<{u}>" for k in ("copy", "read") for u in UNROLLS]
    res = nvrtc_compile(SOURCE, names, arch="sm_90")
    assert res.ok, res.log
    assert set(names) <= set(res.lowered)
