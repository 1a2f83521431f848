"""Isolation: a job that dies, hangs or raises gives `crash`, and the next job gets a fresh worker."""

from __future__ import annotations

import pytest

from triforge.astra.worker import Worker, WorkerStartError
from triforge.astra.worker_jobs import handle


@pytest.fixture()
def worker():
    w = Worker(timeout=60, handler="astra.helpers.handle")
    yield w
    w.stop()


def _job(name: str) -> dict:
    return {"kind": name}


def test_the_product_handler_runs_no_code_by_name():
    with pytest.raises(ValueError, match="unknown job kind 'eval_python'"):
        handle({"kind": "eval_python", "target": "os.getpid"})


def test_a_worker_that_cannot_start_reports_its_cause():
    w = Worker(timeout=30, handler="astra.no_such_module.handle")
    with pytest.raises(WorkerStartError, match="cannot load the job handler astra.no_such_module.handle"):
        w.call({"kind": "ok"})
    w.stop()


def test_a_worker_that_fails_to_spawn_reports_its_cause(monkeypatch):
    from triforge.astra import worker as worker_mod

    def refuse(*args, **kwargs):
        raise OSError("planted: no processes left")

    monkeypatch.setattr(worker_mod, "IsolatedProcess", refuse)
    w = Worker(timeout=30)
    with pytest.raises(WorkerStartError, match="could not be started: OSError: planted: no processes left"):
        w.start()
    w.stop()


def test_jobs_run_in_another_process_and_reuse_it(worker):
    a, b = worker.call(_job("ok")), worker.call(_job("ok"))
    assert a["verdict"] == "correct" and a["instance"] == b["instance"]
    from astra import helpers

    assert a["instance"] != helpers.INSTANCE


@pytest.mark.parametrize("name,text", [("die", "worker died"), ("boom", "planted failure")])
def test_death_and_errors_are_crashes_then_a_fresh_worker(worker, name, text):
    first = worker.call(_job("ok"))
    res = worker.call(_job(name))
    assert res["verdict"] == "crash" and text in " ".join(res["reasons"])
    after = worker.call(_job("ok"))
    assert after["verdict"] == "correct" and after["instance"] != first["instance"]


def test_hang_hits_the_watchdog(worker):
    res = worker.call(_job("hang"), timeout=3)
    assert res["verdict"] == "crash" and "watchdog" in res["reasons"][0]
    assert worker.call(_job("ok"))["verdict"] == "correct"


def test_a_compile_past_its_cpu_bound_ends_the_worker_with_that_reason_and_the_next_job_runs(worker):
    """NVRTC holds the thread, so the bound is the kernel's (RLIMIT_CPU, SIGXCPU): here a spin stands in
    for a compile bomb, which took 190 s of a loaded 2-core machine before this bound existed."""
    res = worker.call({"kind": "spin_past_the_compile_bound", "kwargs": {"seconds": 1}}, timeout=30)
    assert res["verdict"] == "crash" and "CPU time" in res["reasons"][0] and "compile bomb" in res["reasons"][0], res
    assert worker.call(_job("ok"))["verdict"] == "correct"


def test_the_compile_cpu_bound_is_lifted_after_the_compile():
    import resource

    from triforge.astra.compile import cpu_bound

    before = resource.getrlimit(resource.RLIMIT_CPU)
    with cpu_bound(5):
        assert resource.getrlimit(resource.RLIMIT_CPU)[0] != before[0]
    assert resource.getrlimit(resource.RLIMIT_CPU) == before
