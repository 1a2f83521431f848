"""The warm lab worker (no GPU needed: the tests' job handler): found again by later commands, one per user
and GPU selection, replaced when stale, gone after its idle time, a dead worker replaced behind it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from triforge.astra import warm_worker
from triforge.core.errors import UserError

HANDLER = "astra.helpers.handle"
TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"


@pytest.fixture()
def runtime(tmp_path, monkeypatch):
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SRC), str(TESTS)]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield d
    warm_worker.stop()


def _job(kind: str = "ok", **kw) -> dict:
    return warm_worker.request({"op": "job", "job": {"kind": kind, "kwargs": kw}, "timeout": 60}, 60, handler=HANDLER)


def _hello() -> dict | None:
    return warm_worker._ask(warm_worker.paths()[0], {"op": "hello"}, 5.0)


def test_later_commands_find_the_same_worker(runtime):
    a, b = _job(value=1), _job(value=2)
    assert (a["value"], b["value"]) == (1, 2)
    assert a["instance"] == b["instance"]  # one worker process served both
    sock, pidfile, _, _ = warm_worker.paths()
    assert sock.parent == runtime / "triforge-astra" and sock.name == "lab-gpu-all.sock"
    assert oct(sock.stat().st_mode & 0o777) == "0o600" and oct(sock.parent.stat().st_mode & 0o777) == "0o700"
    assert int(pidfile.read_text()) == _hello()["pid"]


def test_a_dead_worker_is_replaced_and_the_server_stays(runtime):
    first = _job()
    server = _hello()["pid"]
    crash = _job("die")
    assert crash["verdict"] == "crash"
    again = _job()
    assert again["instance"] != first["instance"] and _hello()["pid"] == server


def test_one_server_per_gpu_selection(runtime, monkeypatch):
    _job()
    first = _hello()["pid"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert warm_worker.paths()[0].name == "lab-gpu-1.sock"
    _job()
    assert _hello()["pid"] != first
    warm_worker.stop()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert _hello()["pid"] == first  # the first one still runs


def test_a_server_with_other_settings_is_replaced(runtime, monkeypatch, tmp_path):
    _job()
    before = _hello()["pid"]
    monkeypatch.setenv("TRIFORGE_ASTRA_CACHE", str(tmp_path / "other-cache"))
    _job()
    assert _hello()["pid"] != before


def test_stop_and_idle_end_the_server(runtime):
    _job()
    sock = warm_worker.paths()[0]
    assert warm_worker.stop() and not sock.exists()
    assert warm_worker.stop() is False
    warm_worker.ensure_server(HANDLER, idle_s=1.0)
    assert sock.exists()
    end = time.monotonic() + 20
    while sock.exists() and time.monotonic() < end:
        time.sleep(0.2)
    assert not sock.exists() and _hello() is None


def test_a_runtime_dir_open_to_others_is_refused(tmp_path, monkeypatch):
    d = tmp_path / "open"
    (d / "triforge-astra").mkdir(parents=True)
    (d / "triforge-astra").chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    with pytest.raises(UserError, match="closed to others"):
        warm_worker.paths()


def test_an_unknown_request_is_a_one_line_error(runtime):
    with pytest.raises(UserError, match="unknown request 'nope'"):
        warm_worker.request({"op": "nope"}, 10, handler=HANDLER)
