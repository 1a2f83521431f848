"""The Ray executor on a local Ray instance bound to loopback, 2 workers, started once for the module.

Same results as the local pool (cpagent bench and maestro evaluation), a killed worker survived, the
budget's call cap held across workers, cache entries and traces written back to the driver.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from triforge.core import context
from triforge.core.budget import Budget, BudgetLimits
from triforge.core.cache import ResponseCache
from triforge.core.config import ModelConfig
from triforge.core.errors import BudgetExceeded, UserError
from triforge.core.llm import OpenAICompatLLM
from triforge.core.trace import Tracer, read_spans
from triforge.executors.local import LocalPool, TaskFailed, output_dir
from triforge.testing.fake_server import FakeOpenAIServer

# Ray is imported by the executor (which sets it up to bind a local instance to loopback), not here.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="the ray extra is not installed (pip install 'triforge[ray]')")

MINI_IDS = ["abbots_puzzle", "added_corners"]


# `rex`: the Ray executor of tests/executors/conftest.py (one instance for the Ray test modules).


def llm_at(srv: FakeOpenAIServer) -> OpenAICompatLLM:
    return OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url, max_retries=0,
                                               timeout_s=20))


def _square(x: int) -> int:
    if x == 3:
        raise ValueError("three is refused")
    return x * x


def _loopback(addr: str) -> bool:
    ip = ipaddress.ip_address(addr.split("%")[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def test_a_local_instance_listens_on_loopback_only(rex):
    import psutil

    me = psutil.Process()
    listening = []
    for proc in [me, *me.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        listening += [(proc.name(), c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    assert len({name for name, _, _ in listening}) >= 2  # the driver and Ray's own servers (gcs, raylet)
    assert [x for x in listening if not _loopback(x[1])] == []
    import ray

    assert ray.cluster_resources().get("CPU") == 2


def test_results_in_order_and_errors_as_on_the_local_pool(rex):
    got = rex.map(_square, range(6), jobs=2, return_exceptions=True)
    want = LocalPool().map(_square, range(6), jobs=2, return_exceptions=True)
    assert [r if not isinstance(r, Exception) else repr(r) for r in got] == \
           [r if not isinstance(r, Exception) else repr(r) for r in want]
    with pytest.raises(ValueError, match="three is refused"):
        rex.map(_square, range(5), jobs=2)


def _die_first_time(marker: str) -> int:
    m = Path(marker)
    if not m.exists():
        m.write_text("died once")
        os.kill(os.getpid(), signal.SIGKILL)
    return os.getpid()


def _always_die(_: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_worker_is_survived_then_recorded_as_failed(rex, tmp_path):
    done: list[tuple[int, object]] = []
    pids = rex.map(_die_first_time, [str(tmp_path / "a"), str(tmp_path / "b")], jobs=2,
                   on_done=lambda i, r: done.append((i, r)))
    assert all(isinstance(p, int) for p in pids) and sorted(i for i, _ in done) == [0, 1]
    rex.retries = 1
    try:
        [failed] = rex.map(_always_die, [None], jobs=1)
    finally:
        rex.retries = 2
    assert isinstance(failed, TaskFailed) and failed.attempts == 2
    assert "died" in failed.reason.lower() or "crash" in failed.reason.lower()


def _calls_until_refused(item: tuple[str, str]) -> int:
    base_url, tag = item
    llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=base_url, max_retries=0, timeout_s=20))
    n = 0
    try:
        while True:
            llm.complete([{"role": "user", "content": f"{tag} call {n}"}])
            n += 1
    except BudgetExceeded:
        return n


def test_the_call_cap_holds_across_workers(rex):
    gate = threading.Barrier(2, timeout=30)  # the first two calls wait for each other: both workers in flight

    def reply(body):
        if "call 0" in body["messages"][-1]["content"]:
            gate.wait()
        return {"content": "ok", "delay_s": 0.05}

    with FakeOpenAIServer(reply) as srv:
        budget = Budget(BudgetLimits(max_calls=7))
        with context.use(budget=budget):
            made = rex.map(_calls_until_refused, [(srv.base_url, f"task{i}") for i in range(4)], jobs=2)
        assert len(srv.requests) == 7 and sum(made) == 7
        assert budget.spent().calls == 7 and budget.exceeded()


def _one_call(item: tuple[str, str]) -> str:
    base_url, text = item
    llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=base_url, max_retries=0, timeout_s=20))
    out = output_dir()
    if out is not None:
        (out / "note.txt").write_text(text)
    return llm.complete([{"role": "user", "content": text}]).content or ""


def test_cache_entries_traces_and_files_come_back(rex, tmp_path):
    run = tmp_path / "run"
    with FakeOpenAIServer(lambda body: "reply to " + body["messages"][-1]["content"]) as srv:
        items = [(srv.base_url, f"question {i}") for i in range(4)]
        cache = ResponseCache(tmp_path / "cache.sqlite", "rw")
        tracer = Tracer(run)
        with context.use(cache=cache, tracer=tracer), tracer.span("driver") as _:
            first = rex.map(_one_call, items, jobs=2, outputs=lambda it: run / it[1].replace(" ", "_"))
        assert len(cache) == 4 and len(srv.requests) == 4
        cache.close()
        replay = ResponseCache(tmp_path / "cache.sqlite", "replay")
        with context.use(cache=replay):
            again = rex.map(_one_call, items, jobs=2)
        assert again == first == [f"reply to question {i}" for i in range(4)] and len(srv.requests) == 4
    spans = read_spans(run)
    llm_spans = [s for s in spans if s["kind"] == "llm"]
    driver = next(s for s in spans if s["name"] == "driver")
    assert len(llm_spans) == 4 and all(s["trace_id"] == tracer.trace_id for s in spans)
    assert all(s["parent_id"] == driver["span_id"] for s in llm_spans)
    assert (run / "question_2" / "note.txt").read_text() == "question 2"


def test_a_cluster_without_gpu_is_refused_before_submitting(rex):
    with pytest.raises(UserError, match="has none"):
        rex.map(_square, [1], gpu=True)
    if importlib.util.find_spec("torch") is not None:  # astra's candidates: refused before any model call
        from triforge.astra.agents.executor_pool import ExecutorPool

        with pytest.raises(UserError, match="need a GPU each and the ray executor has none"):
            ExecutorPool(rex)


_TIMING = {"wall_s", "wall_s_total", "check_s", "duration_s", "seconds", "moved_aside", "start", "end"}


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in _TIMING}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def test_cpagent_bench_gives_the_same_results_on_ray(rex, tmp_path):
    from triforge.cpagent.bench import run_bench
    from triforge.cpagent.dataset import load_problem
    from triforge.cpagent.reference_replies import reference_submitter
    from triforge.cpagent.task import task_from_problem

    problems = [load_problem(None, pid) for pid in MINI_IDS]
    tasks = [task_from_problem(p) for p in problems]
    with FakeOpenAIServer(reference_submitter(problems)) as srv:
        llm = llm_at(srv)
        local = run_bench(tasks, llm, tmp_path / "local", jobs=2, executor=LocalPool())
        on_ray = run_bench(tasks, llm, tmp_path / "ray", jobs=2, executor=rex)
    assert local["grades"] == {"correct": 2}
    assert _untimed(on_ray) == _untimed(local)
    read = lambda d: _untimed(json.loads((tmp_path / d / "results.json").read_text()))  # noqa: E731
    assert read("ray") == read("local")
    for pid in MINI_IDS:  # each problem's run directory came back: solution, trace, report
        d = tmp_path / "ray" / "problems" / pid / "seed0"
        assert (d / "solution.py").is_file() and (d / "report.md").is_file()
        assert [s["kind"] for s in read_spans(d)] == [s["kind"] for s in
                                                      read_spans(tmp_path / "local" / "problems" / pid / "seed0")]


def test_maestro_evaluation_gives_the_same_results_on_ray(rex, tmp_path):
    from triforge.executors import local as executor_mod
    from triforge.maestro.placeholder_replies import reply
    from triforge.maestro.run import evaluate_to_dir

    with FakeOpenAIServer(reply) as srv:
        llm = llm_at(srv)
        local = evaluate_to_dir(None, "hotpotqa", "val", llm, tmp_path / "local", jobs=2, limit=4)
        with executor_mod.use(rex):
            on_ray = evaluate_to_dir(None, "hotpotqa", "val", llm, tmp_path / "ray", jobs=2, limit=4)
    assert local["n"] == 4 and _untimed(on_ray) == _untimed(local)
    read = lambda d: _untimed(json.loads((tmp_path / d / "results.json").read_text()))  # noqa: E731
    assert read("ray") == read("local")
    rows = lambda d: [_untimed(json.loads(x)) for x in (tmp_path / d / "results.jsonl").read_text().splitlines()]  # noqa: E731
    assert sorted(rows("ray"), key=lambda r: r["example_id"]) == sorted(rows("local"), key=lambda r: r["example_id"])


def test_cli_runs_on_an_existing_cluster_and_refuses_bad_options(rex, tmp_path):
    import ray

    from triforge.maestro.placeholder_replies import reply

    address = ray.get_runtime_context().gcs_address
    base = [sys.executable, "-m", "triforge.cli.app", "maestro", "run", "--bench", "hotpotqa", "--split", "val",
            "--limit", "2", "--model", "fake-model", "--cache", "off"]
    with FakeOpenAIServer(reply) as srv:
        done = subprocess.run([*base, "--base-url", srv.base_url, "--out", str(tmp_path / "run"), "--executor", "ray",
                               "--ray-address", address], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "over 2 run(s)" in done.stdout and len(srv.requests) > 0
        spans = read_spans(tmp_path / "run")
        assert any(s["kind"] == "llm" for s in spans)  # the workers' spans are in the run's trace
        for extra, says in ((["--executor", "dask"], "--executor must be one of local, ray"),
                            (["--ray-address", address], "--ray-address needs --executor ray"),
                            (["--executor", "ray", "--ray-address", "127.0.0.1:1"], "no Ray cluster answers at")):
            bad = subprocess.run([*base, "--base-url", srv.base_url, "--out", str(tmp_path / "bad"), *extra],
                                 capture_output=True, text=True, timeout=120)
            assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr


def test_a_bench_stopped_on_ray_and_resumed_ends_as_an_uninterrupted_local_one(rex, tmp_path):
    from triforge.cpagent.bench import run_bench
    from triforge.cpagent.dataset import load_problem
    from triforge.cpagent.reference_replies import reference_submitter
    from triforge.cpagent.task import task_from_problem

    problems = [load_problem(None, pid) for pid in MINI_IDS]
    tasks = [task_from_problem(p) for p in problems]
    with FakeOpenAIServer(reference_submitter(problems)) as srv:
        llm = llm_at(srv)
        stopped = run_bench(tasks, llm, tmp_path / "ray", jobs=1, executor=rex, budget=Budget(BudgetLimits(max_calls=3)))
        assert len(srv.requests) == 3 and stopped["unfinished"] == {"budget_exceeded": [f"{MINI_IDS[1]}#seed0"]}
        resumed = run_bench(tasks, llm, tmp_path / "ray", jobs=2, executor=rex)
        local = run_bench(tasks, llm, tmp_path / "local", jobs=2, executor=LocalPool())
    assert resumed["grades"] == {"correct": 2} and _untimed(resumed) == _untimed(local)
    read = lambda d: _untimed(json.loads((tmp_path / d / "results.json").read_text()))  # noqa: E731
    assert read("ray") == read("local")
