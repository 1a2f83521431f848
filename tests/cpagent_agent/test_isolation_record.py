"""A cpagent run records how its model-written code was confined, and refuses to run it unconfined."""

from __future__ import annotations

import json

import pytest

from triforge.confine import isolation
from triforge.cpagent.solve import solve_task
from triforge.cpagent.task import CPTask
from triforge.testing.scripted import ScriptedLLM, call

TASK = CPTask(id="one", description="Choose x in 0..9 with x == 3.", data="", output_keys=("x",))
GOOD = "import json\nprint(json.dumps({'x': 3}))\n"


def test_run_record_names_the_isolation(tmp_path, monkeypatch):
    monkeypatch.delenv(isolation.ENV_VAR, raising=False)
    rec = solve_task(TASK, ScriptedLLM([call("submit", code=GOOD)]), tmp_path / "run")
    assert rec["status"] == "submitted"
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["isolation"]
    assert recorded["enabled"] is True and recorded["network"] is False and recorded["hide_home"] is True
    assert recorded["mechanism"] in ("namespaces (root)", "user namespaces")


def test_no_isolation_refuses_the_run_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv(isolation.ENV_VAR, raising=False)
    monkeypatch.setattr(isolation, "mechanism", lambda: isolation.Mechanism("none", why_not="test: disabled"))
    with pytest.raises(isolation.IsolationUnavailable, match="--isolation none"):
        solve_task(TASK, ScriptedLLM([call("submit", code=GOOD)]), tmp_path / "run")
