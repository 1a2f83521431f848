"""What tripped a new user in the first hour (issue 39): bad environment, bad factories, wrong files, wrapped
output, progress drawn before an error, and option suggestions. Each error is one line, exit 2, no traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from triforge.core.config import ModelConfig
from triforge.core.llm import Completion, Usage
from triforge.core.trace import Tracer, agent_scope
from triforge.testing.fake_server import FakeOpenAIServer

SRC = Path(__file__).parents[2] / "src" / "triforge"


def triforge(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TRIFORGE_") and k != "COLUMNS"}
    return subprocess.run([sys.executable, "-m", "triforge.cli.app", *args], capture_output=True, text=True,
                          env={**full, **(env or {})}, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)


def one_line_error(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("error: "), r.stderr
    for needle in needles:
        assert needle in r.stderr, (needle, r.stderr)


# -- 6: every environment variable the CLI reads is checked, with one line ----------------------------------

BAD_VALUES = {
    "TRIFORGE_ISOLATION": "bogus",
    "TRIFORGE_LOCAL_TOOLS": "xml",
    "TRIFORGE_LOCAL_TIMEOUT": "soon",
    "TRIFORGE_LOCAL_MAX_TOKENS": "-5",
    "TRIFORGE_LOCAL_THREADS": "many",
    "TRIFORGE_LOCAL_CTX": "0",
    "TRIFORGE_CPBENCH_WORKERS": "lots",
    "TRIFORGE_CPBENCH_WARM": "maybe",
    "TRIFORGE_BASE_URL": "not a url",
    "TRIFORGE_FORKSERVER_IDLE_S": "forever",
    "TRIFORGE_TMP_MB": "0",
}
GOOD_VALUES = {
    "TRIFORGE_ISOLATION": "NONE", "TRIFORGE_LOCAL_TOOLS": "native", "TRIFORGE_LOCAL_TIMEOUT": "12.5",
    "TRIFORGE_LOCAL_MAX_TOKENS": "512", "TRIFORGE_LOCAL_THREADS": "2", "TRIFORGE_LOCAL_CTX": "4096",
    "TRIFORGE_CPBENCH_WORKERS": "3", "TRIFORGE_CPBENCH_WARM": "0", "TRIFORGE_BASE_URL": "http://127.0.0.1:9/v1",
}


def test_every_triforge_variable_read_in_the_code_is_known_to_the_check():
    """A new TRIFORGE_* variable read anywhere must be added to the CLI's check (or listed as free-form)."""
    from triforge.cli.environment import CHECKS, FREE_FORM

    read = set()
    for path in SRC.rglob("*.py"):
        read |= set(re.findall(r"\b(TRIFORGE_[A-Z_]+)\b", path.read_text(encoding="utf-8")))
    missing = read - set(CHECKS) - set(FREE_FORM)
    assert not missing, f"not checked by triforge.cli.environment: {sorted(missing)}"
    assert set(BAD_VALUES) <= set(CHECKS)


@pytest.mark.parametrize("name", sorted(BAD_VALUES))
def test_a_bad_environment_variable_is_one_line_and_exit_2_for_any_command(name, tmp_path):
    env = {name: BAD_VALUES[name]}
    for argv in (["trace", "summary", str(tmp_path)], ["maestro", "show", "hotpotqa"]):
        one_line_error(triforge(*argv, env=env), f"{name}=")
    for argv in (["--help"], ["--version"], ["cpagent", "solve", "--help"]):  # help and version read no settings
        r = triforge(*argv, env=env)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (argv, r.stderr)


def test_good_environment_values_pass_the_check():
    from triforge.cli.environment import check_environment

    check_environment(GOOD_VALUES)  # raises on any of them
    check_environment({})


def test_a_bad_value_names_what_is_allowed():
    from triforge.cli.environment import check_environment
    from triforge.core.errors import UserError

    for name, value in BAD_VALUES.items():
        with pytest.raises(UserError) as e:
            check_environment({name: value})
        assert str(e.value).startswith(f"{name}={value!r}") and ":" in str(e.value)[len(name):], str(e.value)


# -- 7: a program factory that needs arguments or fails -----------------------------------------------------

@pytest.mark.parametrize("spec,needle", [
    ("json:loads", "json:loads"),  # needs an argument
    ("os:getcwd", "not a Program"),  # runs, returns the wrong thing
    ("fractions:Fraction", "not a Program"),  # a class: callable with no arguments
    ("math:nope", "cannot import"),
    ("statistics:mean", "statistics:mean"),
])
def test_maestro_show_of_a_bad_factory_is_one_line(spec, needle):
    one_line_error(triforge("maestro", "show", spec), needle)


def test_maestro_show_of_a_good_factory_still_works():
    r = triforge("maestro", "show", "triforge.maestro.programs.hotpotqa:hotpotqa_seed")
    assert r.returncode == 0 and r.stdout.strip(), r.stderr


# -- 8: the wrong file, and a trace cut mid-line --------------------------------------------------------------

@pytest.fixture
def run(tmp_path) -> Path:
    t = Tracer(tmp_path / "run")
    with agent_scope("solver"):
        for i in range(3):
            comp = Completion(content="ok", usage=Usage(100 + i, 10), model="m")
            t.llm_span("m", ModelConfig(model="m", base_url="http://127.0.0.1:1/v1"), {"messages": []}, comp, 1.0, 1)
    return tmp_path / "run"


@pytest.mark.parametrize("name,text", [
    ("report.md", "# cpagent run\n\nsolved\n"),
    ("results.json", json.dumps({"status": "submitted"}) + "\n"),
    ("results.jsonl", json.dumps({"example_id": "a", "score": 1.0}) + "\n"),  # JSON lines, but no span
    ("notes.txt", ""),
])
def test_the_wrong_file_is_named_as_such_not_called_corrupt(run, name, text):
    (run / name).write_text(text)
    for cmd in ("summary", "view"):
        r = triforge("trace", cmd, str(run / name))
        one_line_error(r, "not a trace", "trace.jsonl")
        assert "corrupt" not in r.stderr


def test_a_trace_cut_mid_line_shows_what_was_read_and_says_a_line_was_dropped(run):
    path = run / "trace.jsonl"
    whole = path.read_text()
    path.write_text(whole[: len(whole) - 40])  # the last span cut mid-line, as by a crash
    r = triforge("trace", "summary", str(run))
    assert r.returncode == 0, r.stderr
    assert "201" in r.stdout  # input tokens of the two whole spans: 100 + 101
    assert "1 line" in r.stderr and "dropped" in r.stderr and "line 3" in r.stderr, r.stderr
    whole_run = triforge("trace", "summary", str(run.parent / "run"))
    assert "dropped" in whole_run.stderr  # same answer on re-reading
    path.write_text(whole)
    assert "dropped" not in triforge("trace", "summary", str(run)).stderr  # an intact trace: no notice


# -- 9: output that is not a terminal is not wrapped ---------------------------------------------------------

def test_local_install_and_status_keep_a_long_path_whole_when_not_a_terminal(tmp_path):
    folder = tmp_path / ("a-rather-long-folder-name-" * 4)
    folder.mkdir()
    gguf = folder / "my-own-model-q4.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    env = {"TRIFORGE_HOME": str(tmp_path / "home")}
    r = triforge("local", "install", "--model-path", str(gguf), "--skip-server", env=env)
    assert r.returncode == 0, r.stderr
    assert f"local model set to {gguf} (" in r.stdout, r.stdout
    r = triforge("local", "status", env=env)
    assert r.returncode == 0, r.stderr
    assert f"model: {gguf}\n" in r.stdout, r.stdout
    assert len(r.stdout.splitlines()) == 3, r.stdout  # one line per message


def test_llm_ping_keeps_a_long_base_url_whole_when_not_a_terminal():
    replies = ["pong", {"content": "", "tool_calls": [{"name": "get_time", "arguments": {"city": "Paris"}}]}]
    with FakeOpenAIServer(replies) as srv:
        url = srv.base_url
        r = triforge("llm", "ping", "--model", "some-rather-long-model-name-for-this-test-of-wrapping",
                     "--base-url", url)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]  # one message, one line: the alias, the URL and the reply together
    assert first.startswith("ok some-rather-long-model-name") and f" at {url}: replied 'pong' in " in first, r.stdout


# -- 10: no progress bar before a validation error ----------------------------------------------------------

@pytest.mark.parametrize("argv,needle", [
    (["maestro", "run", "--bench", "nope"], "unknown benchmark"),
    (["maestro", "run", "--bench", "ifbench", "--data", "/nonexistent/ifbench.jsonl"], "not found"),
    (["maestro", "run", "--bench", "hotpotqa", "--split", "sideways"], "sideways"),
    (["maestro", "optimize", "--bench", "nope", "--max-rollouts", "4"], "unknown benchmark"),
    (["maestro", "compare", "--bench", "nope", "--max-rollouts", "4"], "unknown benchmark"),
    (["cpagent", "bench", "--data", "/nonexistent/cpbench"], "/nonexistent/cpbench"),
    (["cpagent", "solve", "--file", "/nonexistent/problem.md"], "/nonexistent/problem.md"),
    (["cpagent", "solve", "--problem", "no_such_problem"], "no_such_problem"),
    (["astra", "optimize", "--task", "no_such_task"], "no_such_task"),
])
def test_bad_input_is_refused_before_any_progress_is_drawn(argv, needle, tmp_path):
    r = triforge(*argv, "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "o"))
    one_line_error(r, needle)
    assert r.stdout == "", r.stdout  # no "0/?" bar, nothing else


@pytest.mark.parametrize("argv", [["maestro", "run", "--bench", "hotpotqaa"], ["maestro", "optimize", "--bench", "nope"],
                                  ["maestro", "compare", "--bench", "nope"]])
def test_a_misspelt_benchmark_is_named_before_the_model_or_the_rollouts_are_asked_for(argv, tmp_path):
    r = triforge(*argv, "--out", str(tmp_path / "o"))
    one_line_error(r, "unknown benchmark")
    assert "hotpotqa, ifbench, cpbench" in r.stderr and "model" not in r.stderr and "rollouts" not in r.stderr


# -- 11: an unknown option suggests the closest real ones ---------------------------------------------------

@pytest.mark.parametrize("argv,typo,want,not_want", [
    (["cpagent", "solve"], "--budget", [], ["--out"]),  # solve has no budget option: nothing close
    (["cpagent", "bench"], "--budget", ["--budget-usd"], ["--out"]),
    (["cpagent", "solve"], "--max-step", ["--max-steps"], ["--out"]),
    (["cpagent", "solve"], "--outt", ["--out"], []),
    (["cpagent", "solve"], "--modle", ["--model"], ["--out"]),
    (["maestro", "run"], "--sample", ["--samples"], ["--out"]),
    (["cpagent", "solve"], "--zzzzzz", [], ["--out"]),
])
def test_an_unknown_option_suggests_the_closest_real_options(argv, typo, want, not_want):
    r = triforge(*argv, typo, "1")
    assert r.returncode == 2
    text = " ".join(r.stderr.replace("│", " ").split())
    assert f"No such option: {typo}" in text, text
    said = re.search(r"\(Possible options: ([^)]*)\)", text)
    suggested = said.group(1).replace(",", " ").split() if said else []
    for w in want:
        assert w in suggested, (typo, suggested)
    for n in not_want:
        assert n not in suggested, (typo, suggested)


@pytest.mark.parametrize("content, needle", [(b"\xff\xfe\x00 not utf-8", "is not UTF-8 text"),
                                             (b"__global__ void k() {}\x00\x01", "is not text (it holds NUL bytes)"),
                                             (None, "is a folder, not a file")])
def test_a_file_handed_in_that_is_not_text_is_one_line(content, needle, tmp_path):
    given = tmp_path / "given"
    if content is None:
        given.mkdir()
    else:
        given.write_bytes(content)
    one_line_error(triforge("astra", "check", "--task", "silu_and_mul", "--kernel", str(given)), f"kernel file {given} {needle}")
    one_line_error(triforge("cpagent", "solve", "--file", str(given), "--model", "m", "--base-url",
                            "http://127.0.0.1:9/v1", "--out", str(tmp_path / "o")), f"problem file {given} {needle}")


@pytest.mark.parametrize("name", ["program.json", "program.toml", "data.jsonl", "data.jsonl.gz"])
def test_a_program_or_data_file_that_is_not_text_is_one_line(name, tmp_path):
    given = tmp_path / name
    given.write_bytes(b"\xff\xfe\x00\x81 not text")
    if name.startswith("program"):
        one_line_error(triforge("maestro", "show", str(given)), "a program file is UTF-8 text")
        return
    needle = "is not a readable gzip file" if name.endswith(".gz") else "is not UTF-8 text"
    for bench in ("ifbench", "hotpotqa"):
        one_line_error(triforge("maestro", "run", "--bench", bench, "--data", str(given), "--model", "m", "--base-url",
                                "http://127.0.0.1:9/v1", "--out", str(tmp_path / bench)), needle)


MODEL = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1"]


@pytest.mark.parametrize("argv", [
    ["cpagent", "solve", "--problem", "abbots_puzzle", *MODEL],
    ["cpagent", "bench", "--problem", "abbots_puzzle", *MODEL],
    ["maestro", "run", "--bench", "hotpotqa", *MODEL],
    ["maestro", "optimize", "--bench", "hotpotqa", "--max-rollouts", "20", *MODEL],
    ["astra", "optimize", "--task", "silu_and_mul", "--evaluate-later", *MODEL],
    ["demo"],
])
def test_a_file_where_the_run_directory_should_go_is_one_line(argv, tmp_path):
    blocker = tmp_path / "taken"
    blocker.write_text("the user's own file\n")
    one_line_error(triforge(*argv, "--out", str(blocker)), "a file of that name is in the way")
    assert blocker.read_text() == "the user's own file\n"  # nothing the user gave is lost


@pytest.mark.parametrize("script, needle", [("x = (\n", "syntax error at line 1"),
                                            ("raise ValueError('boom')\n", "failed while loading: ValueError: boom")])
def test_a_fake_server_script_that_fails_to_load_is_one_line(script, needle, tmp_path):
    path = tmp_path / "script.py"
    path.write_text(script)
    one_line_error(triforge("llm", "serve-fake", "--script", str(path), "--port", "0"), needle)


def test_an_output_path_that_cannot_be_written_is_one_line(tmp_path):
    run = tmp_path / "run"
    assert triforge("demo", "--out", str(run)).returncode == 0
    missing = tmp_path / "no" / "such" / "folder" / "view.html"
    one_line_error(triforge("trace", "view", str(run), "--out", str(missing)), f"{missing}: No such file or directory")
