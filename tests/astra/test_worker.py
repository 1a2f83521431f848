"""Isolation: a job that dies, hangs or raises gives `crash`, and the next job gets a fresh worker."""

from __future__ import annotations

import pytest

from triforge.astra.worker import Worker


@pytest.fixture()
def worker():
    w = Worker(timeout=60)
    yield w
    w.stop()


def _job(name: str) -> dict:
    return {"kind": "eval_python", "target": f"astra.helpers.{name}"}


def test_jobs_run_in_another_process_and_reuse_it(worker):
    import os

    a, b = worker.call(_job("ok")), worker.call(_job("ok"))
    assert a["verdict"] == "correct" and a["pid"] == b["pid"] != os.getpid()


@pytest.mark.parametrize("name,text", [("die", "worker died"), ("boom", "planted failure")])
def test_death_and_errors_are_crashes_then_a_fresh_worker(worker, name, text):
    first = worker.call(_job("ok"))
    res = worker.call(_job(name))
    assert res["verdict"] == "crash" and text in " ".join(res["reasons"])
    after = worker.call(_job("ok"))
    assert after["verdict"] == "correct" and after["pid"] != first["pid"]


def test_hang_hits_the_watchdog(worker):
    res = worker.call(_job("hang"), timeout=3)
    assert res["verdict"] == "crash" and "watchdog" in res["reasons"][0]
    assert worker.call(_job("ok"))["verdict"] == "correct"
