"""On the GPU: every planted fault rejected, every rewrite accepted, every hack flagged, crashes contained."""

from __future__ import annotations

import pytest

from triforge.astra.check_host import check
from triforge.astra.corpus.planted.crash import CRASHES
from triforge.astra.corpus.planted.run import judge
from triforge.astra.corpus.planted.variants import all_variants
from triforge.astra.evaluate import EvalOptions
from triforge.astra.task import all_tasks, get_task

pytestmark = pytest.mark.gpu
VARIANTS = all_variants()


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_baseline_is_correct_and_timed(gpu_worker, name):
    res = check(name, get_task(name).baseline_source(), EvalOptions(runs=50), gpu_worker)
    assert res["verdict"] == "correct", res.get("reasons")
    assert len(res["timings"]) == len(get_task(name).timing)
    for row in res["timings"]:
        assert row["candidate_us"] > 0 and row["aa_spread"] < 0.2


@pytest.mark.parametrize("v", VARIANTS, ids=[f"{v.task}/{v.kind}/{v.name}" for v in VARIANTS])
def test_planted_variant(gpu_worker, v):
    res = check(v.task, v.source, EvalOptions(runs=30), gpu_worker, timeout=180)
    assert judge(v, res), f"{v.kind} {v.name}: verdict {res['verdict']} {res.get('reasons')}"


@pytest.mark.parametrize("cname", sorted(CRASHES))
def test_crash_is_contained(gpu_worker, cname):
    task, src, timeout = CRASHES[cname]
    res = check(task, src, EvalOptions(timing=False), gpu_worker, timeout=timeout)
    assert res["verdict"] == "crash"
    after = check(task, get_task(task).baseline_source(), EvalOptions(timing=False, shapes="fuzz"), gpu_worker)
    assert after["verdict"] == "correct"


def test_heldout_shapes_pass_for_baseline(gpu_worker):
    res = check("silu_and_mul", get_task("silu_and_mul").baseline_source(),
                EvalOptions(shapes="heldout", timing=False), gpu_worker)
    assert res["verdict"] == "correct", res.get("reasons")
    assert res["checks"] == 2 * 3 * len(get_task("silu_and_mul").heldout) + 1  # + the shape past 2^31 elements


def test_cli_check_on_the_gpu(tmp_path):
    from typer.testing import CliRunner

    from astra.conftest import HAS_CUDA
    from triforge.cli.astra import app

    if not HAS_CUDA:
        pytest.skip("needs an NVIDIA GPU")
    k = tmp_path / "k.cu"
    k.write_text(get_task("rmsnorm").baseline_source())
    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["check", "--task", "rmsnorm", "--kernel", str(k), "--json", str(out), "--graph"])
    assert res.exit_code == 0, res.output
    import json

    data = json.loads(out.read_text())
    assert data["verdict"] == "correct" and all("candidate_graph_us" in t for t in data["timings"])


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_baselines_pass_past_2_to_the_31_elements(gpu_worker, name):
    """Final verification (`--shapes heldout`) runs one shape whose biggest tensor exceeds 2^31 elements."""
    res = check(name, get_task(name).baseline_source(), EvalOptions(shapes="heldout", timing=False), gpu_worker,
                timeout=300)
    assert res["verdict"] == "correct", res.get("reasons")
