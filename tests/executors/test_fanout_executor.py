"""The local pool behind the executor seam: order, errors, context, GPU slots, output directories."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from triforge.core import context
from triforge.core.budget import Budget
from triforge.core.errors import UserError
from triforge.executors import local as executor
from triforge.executors.local import LocalPool, assigned_gpu, make_executor, output_dir
from triforge.executors.parallel import pmap


def test_results_in_input_order_errors_after_the_others_and_context_carried():
    budget = Budget()
    seen = []

    def fn(x: int) -> int:
        time.sleep(0.01 * (5 - x))
        if x == 2:
            raise ValueError("two")
        assert context.budget() is budget
        return x * 10

    with context.use(budget=budget):
        got = LocalPool().map(fn, range(5), jobs=3, return_exceptions=True,
                              on_done=lambda i, r: seen.append(i))
        with pytest.raises(ValueError, match="two"):
            LocalPool().map(fn, range(5), jobs=3)
    assert got[:2] == [0, 10] and isinstance(got[2], ValueError) and got[3:] == [30, 40]
    assert sorted(seen) == list(range(5))
    assert pmap(lambda x: x + 1, [1, 2, 3], jobs=2) == [2, 3, 4]


def test_gpu_tasks_get_one_gpu_each_and_no_gpu_is_refused():
    lock = threading.Lock()
    holding: set[int] = set()
    peak = []

    def fn(_: int) -> int:
        gpu = assigned_gpu()
        with lock:
            assert gpu not in holding  # no two tasks share a GPU at once
            holding.add(gpu)
            peak.append(len(holding))
        time.sleep(0.02)
        with lock:
            holding.discard(gpu)
        return gpu

    got = LocalPool(gpus=2).map(fn, range(8), jobs=8, gpu=True)
    assert set(got) == {0, 1} and max(peak) == 2
    with pytest.raises(UserError, match="need a GPU each"):
        LocalPool(gpus=0).map(fn, range(2), gpu=True)
    assert LocalPool().map(lambda _: assigned_gpu(), [1]) == [None]


def test_each_task_writes_into_its_own_directory(tmp_path):
    def fn(name: str) -> Path | None:
        out = output_dir()
        out.mkdir(parents=True, exist_ok=True)
        (out / "f.txt").write_text(name)
        return out

    got = LocalPool().map(fn, ["a", "b"], jobs=2, outputs=lambda n: tmp_path / n)
    assert got == [tmp_path / "a", tmp_path / "b"] and (tmp_path / "b" / "f.txt").read_text() == "b"
    assert output_dir() is None


def test_make_executor_and_current():
    assert isinstance(make_executor("local"), LocalPool)
    with pytest.raises(UserError, match="must be one of local, ray"):
        make_executor("dask")
    with pytest.raises(UserError, match="needs --executor ray"):
        make_executor("local", address="127.0.0.1:6379")
    pool = LocalPool(gpus=3)
    with executor.use(pool):
        assert executor.current() is pool
    assert executor.current() is not pool


def test_astra_candidates_as_executor_tasks_carry_their_job_and_need_a_gpu(tmp_path):
    pytest.importorskip("torch", reason="the astra extra is not installed")
    from triforge.astra.agents.evaluator import EvalJob
    from triforge.astra.agents.evaluator import GpuPool as AstraPool
    from triforge.astra.agents.executor_pool import ExecutorPool

    with pytest.raises(UserError, match="need a GPU each and the local executor has none"):
        ExecutorPool(LocalPool(gpus=0))
    pool = ExecutorPool(LocalPool(gpus=1))
    bad = EvalJob(id="r1-k1", task="silu_and_mul", source="this is not a kernel")  # refused before any GPU
    got = pool.evaluate([bad], tmp_path)
    assert got["r1-k1"]["verdict"] == "compile_error" and "silu_and_mul_kernel" in got["r1-k1"]["reasons"][0]
    own = AstraPool(gpus=1)  # astra's own pool of lab workers gives the same verdict
    try:
        assert own.evaluate([bad], tmp_path) == got
    finally:
        own.close()
    assert pool.workers == [None]
