"""A cpagent run's trace says what isolation held for its model-written code: trace.jsonl, `trace summary`
and trace.html; turned off, all three say NOT isolated."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from triforge.confine import isolation
from triforge.confine.isolation import IsolationPolicy
from triforge.confine.run import verified
from triforge.core.trace import read_spans
from triforge.cpagent.solve import solve_task
from triforge.cpagent.task import CPTask
from triforge.testing.scripted import ScriptedLLM, call

TASK = CPTask(id="one", description="Choose x in 0..9 with x == 3.", data="", output_keys=("x",))
GOOD = "import json\nprint(json.dumps({'x': 3}))\n"


def _summary(run) -> str:
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "trace", "summary", str(run)], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "COLUMNS": "80"}, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    tables = [line for line in r.stdout.splitlines() if not line.startswith(("isolation: ", "note: "))]
    assert max(len(line) for line in tables) <= 80, r.stdout  # the tables fit; a message line is never cut
    return " ".join(r.stdout.split())


def _events(run) -> list[dict]:
    return [s for s in read_spans(run) if s["kind"] == "isolation"]


def test_the_trace_shows_the_isolation_that_held(tmp_path, monkeypatch):
    monkeypatch.delenv(isolation.ENV_VAR, raising=False)
    run = tmp_path / "run"
    rec = solve_task(TASK, ScriptedLLM([call("submit", code=GOOD)]), run)
    assert rec["status"] == "submitted"
    held = verified(IsolationPolicy()).confinement()
    assert "network: isolated" in held and "home hidden" in held
    [event] = _events(run)
    attrs = event["attributes"]
    assert attrs["triforge.isolation.held"] == held
    assert attrs["triforge.isolation.mechanism"] in ("namespaces (root)", "user namespaces")
    assert attrs["triforge.isolation.policy"]["enabled"] is True
    assert json.loads((run / "config.json").read_text())["isolation"]["held"] == held
    assert f"isolation: {held}" in _summary(run)
    page = (run / "trace.html").read_text()
    assert "isolation: <span class='badge ok'>held</span>" in page and "network: isolated" in page


def test_turned_off_the_trace_says_not_isolated(tmp_path, monkeypatch):
    monkeypatch.setenv(isolation.ENV_VAR, "none")
    run = tmp_path / "run"
    solve_task(TASK, ScriptedLLM([call("submit", code=GOOD)]), run)
    [event] = _events(run)
    assert event["attributes"]["triforge.isolation.held"] == "NOT isolated (turned off)"
    assert event["attributes"]["triforge.isolation.policy"]["enabled"] is False
    assert "isolation: NOT isolated (turned off)" in _summary(run)
    assert "isolation: <span class='badge bad'>NOT isolated</span>" in (run / "trace.html").read_text()


def test_a_resumed_run_keeps_one_line_per_distinct_isolation(tmp_path, monkeypatch):
    monkeypatch.delenv(isolation.ENV_VAR, raising=False)
    run = tmp_path / "run"
    solve_task(TASK, ScriptedLLM([call("submit", code=GOOD)]), run, grade=False)
    solve_task(TASK, ScriptedLLM([call("submit", code=GOOD)]), run, grade=False, resume=False)
    assert len(_events(run)) == 2
    assert _summary(run).count("isolation: ") == 1


def test_a_bench_records_what_held_and_each_run_traces_it(tmp_path, monkeypatch):
    from triforge.cpagent.bench import run_bench

    monkeypatch.delenv(isolation.ENV_VAR, raising=False)
    out = tmp_path / "bench"
    run_bench([TASK], ScriptedLLM([call("submit", code=GOOD)]), out, jobs=1)
    held = verified(IsolationPolicy()).confinement()
    assert json.loads((out / "config.json").read_text())["isolation"]["held"] == held
    [event] = _events(out / "problems" / "one" / "seed0")
    assert event["attributes"]["triforge.isolation.held"] == held
