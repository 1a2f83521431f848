"""The local evaluation pool (no GPU): one pinned worker per GPU, a batch spread over them."""

from __future__ import annotations

import os
import threading
import time
import uuid

from triforge.astra.agents import evaluator as ev
from triforge.astra.agents.evaluator import EvalJob, GpuPool, PinnedWorker

_INSTANCE = uuid.uuid4().hex  # one per process (PIDs repeat: each worker has its own PID namespace)


def visible(job: dict) -> dict:
    """Runs inside the worker: what this process sees."""
    return {"verdict": "correct", "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": _INSTANCE}


def test_each_worker_sees_its_own_gpu_and_keeps_it_after_a_restart(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    w = PinnedWorker(1, 60, handler="astra.test_agents_pool.visible")
    try:
        first = w.call({})
        assert first["cuda_visible_devices"] == "5"
        w.stop()  # as after a crash: the next call starts a fresh process
        again = w.call({})
        assert again["cuda_visible_devices"] == "5" and again["pid"] != first["pid"]
    finally:
        w.stop()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3,5"  # the parent's environment is left as it was


def test_a_batch_is_spread_over_the_workers(monkeypatch, tmp_path):
    seen: list[tuple[str, int]] = []
    in_flight, peak = [0], [0]
    lock = threading.Lock()

    def fake_run_job(job, worker, run_dir, timeout=900):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
            seen.append((job.id, id(worker)))
        return {"verdict": "correct", "job": job.id}

    monkeypatch.setattr(ev, "run_job", fake_run_job)
    pool = GpuPool(gpus=2)
    jobs = [EvalJob(f"j{i}", "silu_and_mul", "src") for i in range(6)]
    out = pool.evaluate(jobs, tmp_path)
    assert sorted(out) == [j.id for j in jobs] and all(out[j]["job"] == j for j in out)
    assert peak[0] == 2 and len({w for _, w in seen}) == 2
