"""Candidates on several GPUs, with a fake GPU list (no GPU needed): K candidates over G GPUs get one GPU
each, never two at once on one GPU, all G used when K >= G; every lab worker sees only its own GPU; the
GPU that evaluated each candidate is in its result, in results.json and in the report."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from triforge.astra.agents import KernelOptimizeSettings, Optimizer
from triforge.astra.agents.evaluator import EvalJob, GpuPool, run_job
from triforge.astra.agents.executor_pool import ExecutorPool
from triforge.astra.task import get_task, shape_label
from triforge.core.budget import BudgetLimits
from triforge.executors import local as executor
from triforge.testing.scripted import ScriptedLLM, call

TASK = get_task("silu_and_mul")
BASE = TASK.baseline_source()
FAKE_GPUS = "4,6,9"
HERE = "astra.test_multi_gpu"


def probe(job: dict) -> dict:
    """Runs inside the lab worker: a correct verdict, what this process sees, and when it ran."""
    t0 = time.time()
    time.sleep(0.3)
    return {"verdict": "correct", "reasons": [], "timings": [], "seen": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "t0": t0, "t1": time.time(), "pid": os.getpid()}


def fake_lab(job: dict) -> dict:
    """Runs inside the lab worker: the lab's result shape, speedup read from a `// FAKE xS` marker."""
    kw = job.get("kwargs", {})
    if job.get("kind") != "lab_evaluate":
        return {"verdict": "crash", "reasons": ["this fake lab has no comparator table"]}
    m = re.search(r"FAKE x([\d.]+)", kw["source"])
    sp = float(m.group(1)) if m else 1.0
    shapes = TASK.heldout if kw.get("time_heldout") else TASK.timing
    rows = [{"shape": shape_label(s), "baseline_us": 100.0, "candidate_us": 100.0 / sp, "speedup": sp,
             "aa_spread": 0.002, "speedup_real": abs(sp - 1) > 0.006, "min_bytes": TASK.min_bytes(s, "bf16"),
             "candidate_gbs": 1.0} for s in shapes]
    time.sleep(0.2)
    return {"verdict": "correct", "reasons": [], "timings": rows, "copy_gbs": 4000.0, "seed": 1,
            "seen": os.environ.get("CUDA_VISIBLE_DEVICES")}


def jobs(k: int) -> list[EvalJob]:
    return [EvalJob(f"c{i}", "silu_and_mul", BASE + f"// candidate {i}\n") for i in range(k)]


def assert_placed(out: dict[str, dict[str, Any]], gpus: list[str]) -> None:
    """One GPU each (the one recorded is the one the worker saw), none shared at once, all used."""
    for cid, r in out.items():
        assert r["verdict"] == "correct", (cid, r)
        assert r["gpu"] in gpus and r["seen"] == r["gpu"], (cid, r["gpu"], r["seen"])
        assert r["host"]
    assert {r["gpu"] for r in out.values()} == set(gpus)
    for g in gpus:
        spans = sorted((r["t0"], r["t1"]) for r in out.values() if r["gpu"] == g)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), (g, spans)


def test_astra_pool_places_k_candidates_on_g_gpus(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", FAKE_GPUS)
    pool = GpuPool(gpus=3, timeout=60, handler=f"{HERE}.probe")
    try:
        out = pool.evaluate(jobs(7), tmp_path)
    finally:
        pool.close()
    assert sorted(out) == [f"c{i}" for i in range(7)]
    assert_placed(out, FAKE_GPUS.split(","))
    pids = {r["gpu"]: set() for r in out.values()}
    for r in out.values():
        pids[r["gpu"]].add(r["pid"])
    assert all(len(p) == 1 for p in pids.values())  # one warm worker per GPU, kept across jobs


def test_executor_pool_pins_each_task_to_its_slot(monkeypatch, tmp_path):
    """Through the core's local executor a task's own lab worker sees the GPU of its slot, not all of them."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    pool = ExecutorPool(executor.LocalPool(gpus=2), timeout=60, handler=f"{HERE}.probe")
    out = pool.evaluate(jobs(4), tmp_path)
    assert_placed(out, ["4", "6"])


def test_the_gpu_is_recorded_for_a_job_refused_before_the_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", FAKE_GPUS)
    from triforge.astra.agents.evaluator import PinnedWorker

    w = PinnedWorker(2, 60, handler=f"{HERE}.probe")
    try:
        res = run_job(EvalJob("bad", "silu_and_mul", "not a kernel"), w, tmp_path)
    finally:
        w.stop()
    assert res["verdict"] == "compile_error" and res["gpu"] == "9"


def test_the_profile_runs_on_the_gpu_of_its_job(monkeypatch, tmp_path):
    """ncu must not land on another candidate's GPU while that one is being timed."""
    from triforge.astra import lab, profile
    from triforge.astra.agents.evaluator import PinnedWorker

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", FAKE_GPUS)
    seen: dict[str, Any] = {}

    class Ran:
        ok, returncode, stdout, stderr, duration_s = False, 1, "", "no ncu here", 0.0

    def fake_run(cmd, timeout=None, env=None, **kw):
        seen["env"] = env
        return Ran()

    monkeypatch.setattr(profile, "_tool", lambda name: "/bin/ncu")
    monkeypatch.setattr(profile.proc, "run", fake_run)
    w = PinnedWorker(1, 60, handler=f"{HERE}.fake_lab")
    try:
        res = run_job(EvalJob("c", "silu_and_mul", BASE, profile=True), w, tmp_path)
    finally:
        w.stop()
    assert res["verdict"] == "correct" and res["gpu"] == "6"
    assert "ncu failed" in res["profile"]["absent"] and seen["env"]["CUDA_VISIBLE_DEVICES"] == "6"
    assert lab.profile.__kwdefaults__["gpu"] is None  # without a GPU named, the caller's environment holds


def test_results_json_and_report_name_the_gpu_of_each_candidate(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    coding = [call("submit_kernel", code=f"// FAKE x{sp}\n" + BASE) for sp in ("1.30", "1.10")]
    plans = call("submit_plans", plans=[{"title": f"plan {i}", "change": "c", "predicted_effect": "e"} for i in range(2)])
    ms = {"testing": ScriptedLLM([call("finish_tests", summary="none")]),
          "profiling": ScriptedLLM([call("submit_analysis", analysis="memory bound")]),
          "planning": ScriptedLLM([plans]), "coding": ScriptedLLM(coding)}
    s = KernelOptimizeSettings("silu_and_mul", BASE, rounds=1, candidates=2, repairs=0, profile=False,
                         models={r: "s" for r in ms})
    pool = GpuPool(gpus=2, timeout=60, handler=f"{HERE}.fake_lab")
    try:
        out = Optimizer(s, ms, pool, tmp_path, BudgetLimits(max_evaluations=10)).run()
    finally:
        pool.close()
    assert out.status == "done" and out.best_id == "r1-k0"
    res = json.loads((tmp_path / "results.json").read_text())
    gpus = {cid: c["result"]["gpu"] for cid, c in res["candidates"].items()}
    assert set(gpus) >= {"r0-start", "r1-k0", "r1-k1", "final-r1-k0", "final-start"}
    assert set(gpus.values()) <= {"2", "5"} and gpus["r1-k0"] != gpus["r1-k1"]  # round 1: both GPUs at once
    assert all(c["result"]["seen"] == c["result"]["gpu"] for c in res["candidates"].values())
    md = (tmp_path / "report.md").read_text()
    assert "| round | candidate | GPU | plan |" in md
    for cid in ("r0-start", "r1-k0", "r1-k1"):
        assert f"| {cid} | {gpus[cid]} |" in md
    assert f"final-r1-k0 on GPU {gpus['final-r1-k0']}" in md
    assert "<th>GPU</th>" in (tmp_path / "report.html").read_text()


def test_report_shows_host_and_gpu_when_several_hosts_took_part():
    from triforge.astra.agents.report import placement

    res = {"candidates": {"a": {"result": {"gpu": "0", "host": "n1"}}, "b": {"result": {"gpu": "0", "host": "n2"}},
                          "c": {"status": "skipped"}}}
    assert placement(res) == {"a": "n1/0", "b": "n2/0", "c": "-"}
    res["candidates"]["b"]["result"]["host"] = "n1"
    assert placement(res)["b"] == "0"


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the ray extra is not installed")
def test_ray_places_k_candidates_on_g_gpus_one_each(tmp_path):
    """A local Ray instance (loopback) declaring 2 GPUs: each task asks for num_gpus=1, Ray sets
    CUDA_VISIBLE_DEVICES for it, its lab worker sees that one GPU, and the result records it."""
    from triforge.executors import ray_executor as executor_ray

    ray = executor_ray._import_ray(local=True)
    if ray.is_initialized():
        pytest.skip("another Ray instance runs in this process")
    tests_dir = str(Path(__file__).resolve().parents[1])
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING",
             _node_ip_address="127.0.0.1",
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([tests_dir, *sys.path])}})
    try:
        pool = ExecutorPool(executor_ray.RayExecutor(), timeout=120, handler=f"{HERE}.probe")
        assert pool.width == 2
        out = pool.evaluate(jobs(4), tmp_path)
        pool.close()
    finally:
        ray.shutdown()
    assert_placed(out, ["0", "1"])
