"""`astra optimize`'s caps hold on what reaches the endpoint, and its renamed options keep their old spelling."""

from __future__ import annotations

import json

import pytest

from astra.test_agents_cli import run_cli
from astra.test_agents_loop import FakeLab, kernel
from triforge.cli import astra_optimize
from triforge.testing.fake_server import FakeOpenAIServer

ROUND = [  # what one round asks for, repeated: testing, profiling, planning, coding
    {"tool_calls": [{"name": "finish_tests", "arguments": {"summary": "none"}}]},
    {"tool_calls": [{"name": "submit_analysis", "arguments": {"analysis": "memory bound"}}]},
    {"tool_calls": [{"name": "submit_plans", "arguments": {"plans": [
        {"title": "vectorize", "change": "uint4 loads", "predicted_effect": "x1.5"}]}}]},
    {"tool_calls": [{"name": "submit_kernel", "arguments": {"code": kernel("correct x1.5")}}]},
]


@pytest.mark.parametrize("cap", [1, 3, 6])
def test_max_calls_caps_the_requests_that_reach_the_endpoint(tmp_path, capsys, monkeypatch, cap):
    monkeypatch.setattr(astra_optimize, "make_evaluator", lambda later, gpus: FakeLab())
    run = tmp_path / "run"
    with FakeOpenAIServer(ROUND * 4) as srv:
        code, out = run_cli(["astra", "optimize", "--task", "silu_and_mul", "--out", str(run), "-k", "1",
                             "--rounds", "4", "--repairs", "0", "--model", "fake-model", "--base-url", srv.base_url,
                             "--max-calls", str(cap)], capsys)
        sent = len(srv.requests)
    assert code == 0, out
    assert 0 < sent <= cap
    res = json.loads((run / "results.json").read_text())
    assert res["spend"]["calls"] == sent and res["limits"]["max_calls"] == cap
    assert "budget spent" in out


@pytest.mark.parametrize("flag", ["--no-ncu", "--no-profile"])
def test_no_ncu_and_its_old_spelling_skip_the_digest(tmp_path, capsys, monkeypatch, flag):
    monkeypatch.setattr(astra_optimize, "make_evaluator", lambda later, gpus: FakeLab())
    run = tmp_path / "run"
    with FakeOpenAIServer(ROUND) as srv:
        code, out = run_cli(["astra", "optimize", "--task", "silu_and_mul", "--out", str(run), "-k", "1",
                             "--rounds", "1", "--repairs", "0", "--model", "fake-model", "--base-url", srv.base_url,
                             flag], capsys)
    assert code == 0, out
    assert json.loads((run / "results.json").read_text())["settings"]["profile"] is False


def test_the_profile_is_on_without_the_flag_and_only_the_new_spelling_is_shown(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(astra_optimize, "make_evaluator", lambda later, gpus: FakeLab())
    run = tmp_path / "run"
    with FakeOpenAIServer(ROUND) as srv:
        code, out = run_cli(["astra", "optimize", "--task", "silu_and_mul", "--out", str(run), "-k", "1",
                             "--rounds", "1", "--repairs", "0", "--model", "fake-model", "--base-url", srv.base_url],
                            capsys)
    assert code == 0, out
    assert json.loads((run / "results.json").read_text())["settings"]["profile"] is True
    code, helptext = run_cli(["astra", "optimize", "--help"], capsys)
    assert "--no-ncu" in helptext and "--no-profile" not in helptext


def test_compare_is_implemented_by_a_function_of_its_name():
    from triforge.cli import astra

    assert astra.compare_cmd.__name__ == "compare_cmd" and not hasattr(astra, "bench_cmd")

