"""Every cap `maestro optimize` takes is a hard cap on what it sends, the final test evaluation included.

Counted where it cannot be fooled: the requests that reach the fake server over loopback."""

from __future__ import annotations

import json

import pytest
from test_optimize_cli import reply, triforge

from triforge.maestro.optimize import budget as search_budget_mod
from triforge.maestro.optimize.runner import Task, optimize
from triforge.maestro.optimize.state import ProgramOptimizeSettings
from triforge.maestro.sim_bed import SimLM, sim_tasks
from triforge.maestro.sim_reflection import SimReflection
from triforge.testing.fake_server import FakeOpenAIServer


def _optimize(srv, out, *extra):
    return triforge("maestro", "optimize", "--bench", "hotpotqa", "--model", "fake-model", "--base-url",
                    srv.base_url, "--limits", "8,6,10", "--jobs", "2", "--out", str(out), *extra)


@pytest.mark.parametrize("cap", [40, 55, 90])
def test_max_calls_caps_every_request_sent_the_final_test_included(tmp_path, cap):
    with FakeOpenAIServer(reply) as srv:
        r = _optimize(srv, tmp_path / "o", "--max-rollouts", "400", "--max-calls", str(cap))
        sent = len(srv.requests)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "o" / "results.json").read_text())["summary"]
    assert sent <= cap, (sent, s)
    assert s["spent"]["sent"] == sent  # nothing sent uncounted
    assert s["search_calls"] + s["test_calls"] == s["spent"]["total_calls"] >= sent  # a cache answer counts too
    assert s["test_calls"] > 0 and s["n_test_seed"] == s["n_test"]  # the search left the test its calls
    assert "final test evaluation" in s["stop_reason"]
    report = (tmp_path / "o" / "report.md").read_text()
    assert f"{s['search_calls']} + {s['test_calls']} ({cap})" in report


def test_an_underestimated_final_test_is_stopped_by_the_cap_and_the_report_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(search_budget_mod, "TEST_MARGIN", 0.0)  # keep nothing back: the search spends it all
    t = sim_tasks()[0]
    task = Task("sim", t.program, t.split("train"), t.split("val"), t.split("test"), t.metric, t.retrievers())
    lm = SimLM()
    s = optimize("maestro", task, lm, SimReflection(), ProgramOptimizeSettings(budget=400, max_calls=60, patience=50),
                 tmp_path, jobs=1)
    assert s["spent"]["total_calls"] <= 60
    assert s["test_stop"] and "60" in s["test_stop"]
    assert s["n_test_seed"] < s["n_test"]
    assert "stopped by the call cap" in (tmp_path / "report.md").read_text()


def test_the_old_spelling_budget_still_works_and_is_hidden(tmp_path):
    with FakeOpenAIServer(reply) as srv:
        r = _optimize(srv, tmp_path / "o", "--budget", "20")
    assert r.returncode == 0, r.stderr
    assert "--budget is now --max-rollouts" in r.stderr
    s = json.loads((tmp_path / "o" / "results.json").read_text())["summary"]
    assert s["budget"] == 20 and s["spent"]["search_rollouts"] <= 20
    both = triforge("maestro", "optimize", "--bench", "hotpotqa", "--budget", "20", "--max-rollouts", "30",
                    "--out", str(tmp_path / "p"))
    assert both.returncode == 2 and "give one of them" in both.stderr
    none = triforge("maestro", "optimize", "--bench", "hotpotqa", "--out", str(tmp_path / "q"))
    assert none.returncode == 2 and "--max-rollouts" in none.stderr and "Traceback" not in none.stderr
    helptext = triforge("maestro", "optimize", "--help").stdout
    assert "--max-rollouts" in helptext and "--budget " not in helptext
