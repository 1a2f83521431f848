"""`triforge doctor` and `--isolation`: what isolation holds is printed from /proc; turning it off is explicit."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from triforge.cli.app import app
from triforge.confine import isolation

runner = CliRunner()


def test_doctor_prints_verified_isolation_for_both_paths(monkeypatch):
    monkeypatch.delenv(isolation.ENV_VAR, raising=False)
    res = runner.invoke(app, ["doctor"], terminal_width=400)
    assert res.exit_code == 0, res.output
    lines = {line.split(":", 1)[0]: line for line in res.output.splitlines()}
    for path in ("one-shot programs", "kernel cells"):
        assert "network: isolated" in lines[path] and "private /tmp" in lines[path]
        assert "home hidden" in lines[path] and "own PID namespace" in lines[path]
    assert lines["mechanism"].split(": ", 1)[1].startswith(("namespaces (root)", "user namespaces"))
    # the probe's own temporary folder is gone once this is printed: it is named for what it is, not by path
    assert "writable: only its own working folder and a private /tmp" in lines["one-shot programs"]


def test_doctor_fails_where_nothing_isolates(monkeypatch):
    monkeypatch.delenv(isolation.ENV_VAR, raising=False)
    monkeypatch.setattr(isolation, "mechanism", lambda: isolation.Mechanism("none", why_not="namespaces disabled"))
    res = runner.invoke(app, ["doctor"], terminal_width=400)
    assert res.exit_code == 1 and "NOT isolated" in res.output and "--isolation none" in res.output


def test_isolation_none_reaches_every_policy_built_from_the_environment(monkeypatch):
    # the option writes os.environ in this process: registered first, monkeypatch restores the variable's
    # absence afterwards (a later test would otherwise run with isolation off)
    monkeypatch.setenv(isolation.ENV_VAR, "auto")
    res = runner.invoke(app, ["--isolation", "none", "doctor"], terminal_width=400)
    assert res.exit_code == 1 and "turned off" in res.output, res.output
    assert not isolation.IsolationPolicy.from_env().enabled


def test_bad_isolation_value_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "--isolation", "off", "doctor"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == "error: --isolation off: use auto (the default) or none"
