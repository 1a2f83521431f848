"""A new user's first runs (issue 39): hints that run as printed, the built-in model named in alias errors, a
default run directory, the isolation line, ping's advice, the data set named, doctor's sentences."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from triforge.testing.fake_server import FakeOpenAIServer

ROOT = Path(__file__).parents[2]
VENV_BIN = Path(sys.executable).parent


def triforge(*args: str, cwd: Path, env: dict[str, str] | None = None, python: str = sys.executable,
             timeout: float = 180) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRIFORGE_") and k != "COLUMNS"}
    base.update(XDG_CONFIG_HOME=str(cwd / ".config"), TRIFORGE_HOME=str(cwd / ".triforge-home"))
    return subprocess.run([python, "-m", "triforge.cli.app", *args], capture_output=True, text=True, cwd=cwd,
                          env={**base, **(env or {})}, timeout=timeout, stdin=subprocess.DEVNULL)


# -- 1: a command a hint prints runs as printed --------------------------------------------------------------

@pytest.mark.parametrize("where", ["repo", "elsewhere"])
def test_a_hint_names_a_triforge_that_runs_when_it_is_not_on_path(tmp_path, where):
    cwd = ROOT if where == "repo" else tmp_path
    path = "/usr/bin:/bin"  # .venv/bin not on PATH: the venv was never activated
    r = triforge("llm", "ping", "-m", "local", cwd=cwd, env={"PATH": path, "TRIFORGE_HOME": str(tmp_path / "h")})
    assert r.returncode == 2, r.stderr
    printed = re.search(r"run `([^`]*) local install`", r.stderr)
    assert printed, r.stderr
    prog = printed.group(1)
    assert prog != "triforge"  # bare `triforge` is "command not found" here
    if where == "repo":
        assert prog == ".venv/bin/triforge" or not (ROOT / ".venv").is_dir()
    ran = subprocess.run(f"{shlex.quote(prog) if ' ' in prog else prog} --version", shell=True, cwd=cwd,
                         capture_output=True, text=True, env={**os.environ, "PATH": path}, timeout=60)
    assert ran.returncode == 0 and ran.stdout.startswith("triforge "), ran.stderr


def test_a_hint_says_plain_triforge_once_it_is_on_path(tmp_path):
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "TRIFORGE_HOME": str(tmp_path / "h")}
    r = triforge("local", "status", cwd=tmp_path, env=env)
    assert "(run `triforge local install`)" in r.stdout, r.stdout


# -- 2: the unknown-alias error names the built-in model ----------------------------------------------------

def test_an_unknown_alias_names_the_built_in_local_model(tmp_path):
    r = triforge("llm", "ping", "-m", "coder", cwd=tmp_path)
    assert r.returncode == 2 and "known: none configured" in r.stderr
    assert "built in: local (not set up here)" in r.stderr, r.stderr
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 32)
    assert triforge("local", "install", "--model-path", str(gguf), "--skip-server", cwd=tmp_path).returncode == 0
    r = triforge("llm", "ping", "-m", "coder", cwd=tmp_path)
    assert r.returncode == 2 and "built in: local (available: --model local)" in r.stderr, r.stderr


def test_a_configured_alias_is_listed_and_a_configured_local_is_not_called_built_in(tmp_path):
    (tmp_path / "triforge.toml").write_text('[models.local]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n')
    r = triforge("llm", "ping", "-m", "coder", cwd=tmp_path)
    assert r.returncode == 2 and "known: local" in r.stderr and "built in" not in r.stderr, r.stderr


# -- 4 and 13: a default run directory, and the isolation line first -------------------------------------

PROGRAM = "import json\nprint(json.dumps({'x': 2}))\n"


def test_cpagent_solve_without_out_writes_a_run_directory_named_after_the_problem(tmp_path):
    problem = tmp_path / "pick_x.md"
    problem.write_text("Pick x in 1..3.\nOutput keys: x\n")
    submit = {"content": "", "tool_calls": [{"name": "submit", "arguments": {"code": PROGRAM}}]}
    with FakeOpenAIServer([submit]) as srv:
        r = triforge("cpagent", "solve", "--file", str(problem), "--model", "m", "--base-url", srv.base_url,
                     cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    [run] = list((tmp_path / "runs").iterdir())
    assert re.fullmatch(r"pick_x-\d{8}-\d{6}", run.name), run.name
    assert json.loads((run / "results.json").read_text())["status"] == "submitted"
    assert f"run directory {Path('runs') / run.name}" in r.stdout, r.stdout
    lines = r.stdout.splitlines()
    iso = next(i for i, line in enumerate(lines) if line.startswith("isolation of model-written code: "))
    agent = next(i for i, line in enumerate(lines) if line.startswith("agent: "))
    assert iso < agent and "mechanism: " in lines[iso] and "network: isolated" in lines[iso], r.stdout


def test_the_isolation_line_says_so_when_isolation_is_turned_off(tmp_path):
    problem = tmp_path / "p.md"
    problem.write_text("Pick x in 1..3.\nOutput keys: x\n")
    submit = {"content": "", "tool_calls": [{"name": "submit", "arguments": {"code": PROGRAM}}]}
    with FakeOpenAIServer([submit]) as srv:
        r = triforge("--isolation", "none", "cpagent", "solve", "--file", str(problem), "--model", "m",
                     "--base-url", srv.base_url, "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "isolation of model-written code: NOT isolated (turned off)" in r.stdout, r.stdout


@pytest.mark.parametrize("argv", [["cpagent", "solve"], ["cpagent", "bench"], ["maestro", "run"],
                                  ["maestro", "optimize"], ["maestro", "compare"], ["astra", "optimize"]])
def test_no_run_command_requires_out_and_each_says_its_default(argv, tmp_path):
    r = triforge(*argv, "--help", cwd=tmp_path, env={"COLUMNS": "400"})
    assert r.returncode == 0, r.stderr
    out_line = next(line for line in r.stdout.splitlines() if line.strip("│ ").startswith("--out "))
    assert "required" not in out_line and "runs/" in out_line, out_line


def test_default_out_names_and_cleans():
    from triforge.cli.common import default_out

    assert re.fullmatch(r"runs/abbots_puzzle-\d{8}-\d{6}", str(default_out("abbots_puzzle")))
    assert re.fullmatch(r"runs/my-problem-\d{8}-\d{6}", str(default_out("../my problem/")))
    assert re.fullmatch(r"runs/run-\d{8}-\d{6}", str(default_out("///")))


# -- 5: ping's advice matches what the alias does -------------------------------------------------------------

@pytest.mark.parametrize("native", [True, False])
def test_ping_advises_the_text_protocol_only_to_an_alias_that_does_not_use_it(tmp_path, native):
    with FakeOpenAIServer(["pong", "It is noon in Paris."]) as srv:
        (tmp_path / "triforge.toml").write_text(
            f'[models.a]\nmodel = "m"\nbase_url = "{srv.base_url}"\nnative_tools = {str(native).lower()}\n')
        r = triforge("llm", "ping", "-m", "a", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    advised = "set native_tools = false" in r.stdout
    assert advised is native, r.stdout
    if not native:
        assert "already uses triforge's text protocol" in r.stdout


def test_docs_say_the_local_alias_uses_the_text_protocol():
    from triforge.local.llm import local_model_config

    intro = (ROOT / "docs" / "local.md").read_text().split("## ")[0]
    assert "native_tools = false" in intro and "with native tool\ncalls" not in intro
    assert local_model_config(Path("/dev/null")).native_tools is False  # what the docs describe


# -- 14: the data set and its size are named ---------------------------------------------------------------

def test_maestro_run_names_the_data_set_and_its_size(tmp_path):
    r = triforge("maestro", "run", "--bench", "hotpotqa", "--limit", "1", "--model", "m", "--base-url",
                 "http://127.0.0.1:9/v1", "--out", str(tmp_path / "o"), cwd=tmp_path)
    said = re.search(r"data: (\S+)[^\n]*?(\d+) examples", r.stdout)
    assert said and said.group(1) == "hotpotqa-mini" and said.group(2) == "20", r.stdout + r.stderr
    report = (tmp_path / "o" / "report.md").read_text()
    assert "- data: hotpotqa-mini" in report and "20 examples" in report
    assert json.loads((tmp_path / "o" / "results.json").read_text())["summary"]["data_set"].startswith("hotpotqa-mini")


# -- 13: doctor says one true thing per line -----------------------------------------------------------------

def test_doctor_turned_off_is_one_sentence(tmp_path):
    r = triforge("--isolation", "none", "doctor", cwd=tmp_path)
    assert r.returncode == 1
    [line] = r.stdout.splitlines()
    assert line.startswith("isolation turned off") and "unprotected" in line, r.stdout


def test_doctor_lists_the_working_folder_as_writable_and_not_proc(tmp_path):
    r = triforge("doctor", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    cells = next(line for line in r.stdout.splitlines() if line.startswith("kernel cells: "))
    writable = re.search(r"writable: ([^;]*);", cells).group(1)
    assert "/proc" not in writable, writable
    assert writable.startswith("only /") and "a private /tmp" in writable, writable
    assert re.search(r"/\S*triforge-sandbox-\S+", writable), writable  # the kernel's working folder
