"""`triforge astra optimize` and `evaluate` without a GPU: input errors before any model call, the deferred
exit code and message, a user's own task file end to end (scripted models, fake evaluator)."""

from __future__ import annotations

import contextlib
import json

import pytest
from typer.testing import CliRunner

from astra.test_agents_loop import BASE, FakeLab, kernel, models, plans
from triforge.astra.agents import Deferred
from triforge.cli import astra_optimize
from triforge.cli.astra import app
from triforge.core.errors import UserError
from triforge.testing.scripted import call

TASK_FILE = '''
from triforge.astra.tasks._act import make_task, silu64


def _eager(x):
    import torch.nn.functional as F

    return F.silu(x)


TASK = make_task("my_silu", silu64, _eager, 5, "my own silu_and_mul")
'''
MY_BASE = BASE.replace("silu_and_mul_kernel", "my_silu_kernel")


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    """(exit code, output) as `triforge` gives them: a UserError is one line and exit 2 (triforge.cli.app.main)."""
    assert argv[0] == "astra"
    res = CliRunner().invoke(app, argv[1:], terminal_width=240)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        if isinstance(res.exception, UserError):
            return 2, str(res.exception)
        raise res.exception
    return res.exit_code, res.output


@pytest.fixture()
def no_models(monkeypatch):
    """Any model client opened fails the test: input errors must come before."""

    def boom(*a, **k):
        raise AssertionError("a model was opened before the input was validated")

    monkeypatch.setattr(astra_optimize, "open_models", boom)


def write_task(tmp_path, body=TASK_FILE, base=MY_BASE):
    (tmp_path / "my_task.py").write_text(body)
    if base is not None:
        (tmp_path / "my_task.cu").write_text(base)
    return tmp_path / "my_task.py"


@pytest.mark.parametrize("body,base,message", [
    ("TASK = 3\n", MY_BASE, "must define TASK = TaskSpec"),
    ("def broken(:\n", MY_BASE, "failed to load: SyntaxError"),
    (TASK_FILE, None, "baseline kernel"),
    (TASK_FILE, MY_BASE.replace("int d)", "int d, int e)"), "do not match the baseline"),
    (TASK_FILE.replace('"my_silu"', '"silu_and_mul"'), BASE, "is a built-in task"),
    (TASK_FILE + "TASK.timing = []\n", MY_BASE, "no timing shapes"),
    (TASK_FILE + "TASK.default_launch = {'grid': 'tokens', 'block': '128'}\n", MY_BASE, "unknown name 'tokens'"),
])
def test_a_malformed_task_file_is_one_line_and_exit_2(tmp_path, capsys, no_models, body, base, message):
    tf = write_task(tmp_path, body, base)
    code, out = run_cli(["astra", "optimize", "--task-file", str(tf), "--out", str(tmp_path / "run"), "-m", "x"], capsys)
    assert code == 2 and message in out and "Traceback" not in out


@pytest.mark.parametrize("source,message", [
    (BASE.replace("silu_and_mul_kernel", "other_kernel"), "no `__global__ void silu_and_mul_kernel"),
    (BASE.replace("int d)", "long long d)"), "parameter list of silu_and_mul_kernel differs"),
    (BASE.replace("// @launch block: min(d, 1024)", "// @launch block: import os"), "bad @launch block"),
])
def test_a_kernel_not_matching_the_task_is_refused_before_any_model(tmp_path, capsys, no_models, source, message):
    k = tmp_path / "k.cu"
    k.write_text(source)
    code, out = run_cli(["astra", "optimize", "--task", "silu_and_mul", "--kernel", str(k), "--out", str(tmp_path / "r"),
                         "-m", "x"], capsys)
    assert code == 2 and "does not match task silu_and_mul" in out and message in out


@pytest.mark.parametrize("args,message", [
    (["--role-model", "coding"], "write ROLE=ALIAS"),
    (["--role-model", "judge=x"], "unknown role 'judge'"),
    (["--kernel", "/nonexistent.cu"], "not found"),
    (["--max-evaluations", "2"], "at least 3"),
    (["--profile", "tiny"], "--profile must be default or small-model"),
])
def test_bad_options(tmp_path, capsys, no_models, args, message):
    code, out = run_cli(["astra", "optimize", "--task", "silu_and_mul", "--out", str(tmp_path / "r"), "-m", "x", *args], capsys)
    assert code == 2 and message in out


def test_evaluate_later_exits_3_with_the_command_then_evaluate_and_resume(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    scripts = iter([models([], testing=[], profiling=[], planning=[]),
                    models([call("submit_kernel", code=kernel("correct x1.2"))], planning=[plans(1)]),
                    models([], testing=[], profiling=[], planning=[]),
                    models([], testing=[], profiling=[], planning=[])])

    @contextlib.contextmanager
    def scripted(roles, *a, **k):
        ms = next(scripts)
        yield ms, {r: "scripted" for r in ms}

    monkeypatch.setattr(astra_optimize, "open_models", scripted)
    monkeypatch.setattr(astra_optimize, "make_evaluator", lambda later, gpus: Deferred() if later else FakeLab())
    argv = ["astra", "optimize", "--task", "silu_and_mul", "--out", str(run), "-k", "1", "--rounds", "1",
            "--repairs", "0", "--evaluate-later", "-m", "x"]
    code, out = run_cli(argv, capsys)
    assert code == 3
    assert "1 candidate(s) wait for evaluation" in out and f"triforge astra evaluate {run}" in out
    assert (run / "candidates" / "r0-start" / "kernel.cu").is_file()
    for expect in (1, 1, 2):  # the start, round 1's candidate, the final check (winner and start)
        code, out = run_cli(["astra", "evaluate", str(run)], capsys)
        assert code == 0 and f"{expect} of {expect} evaluated" in out
        code, out = run_cli(argv, capsys)
        if expect < 2:
            assert code == 3
    assert code == 0 and "best r1-k0" in out
    assert (run / "report.html").is_file()


def test_a_users_task_file_runs_end_to_end(tmp_path, capsys, monkeypatch):
    tf = write_task(tmp_path)
    lab = FakeLab()

    @contextlib.contextmanager
    def scripted(roles, *a, **k):
        ms = models([call("submit_kernel", code="// FAKE correct x1.5\n" + MY_BASE)], planning=[plans(1)])
        yield ms, {r: "scripted" for r in ms}

    monkeypatch.setattr(astra_optimize, "open_models", scripted)
    monkeypatch.setattr(astra_optimize, "make_evaluator", lambda later, gpus: lab)
    run = tmp_path / "run"
    code, out = run_cli(["astra", "optimize", "--task-file", str(tf), "--out", str(run), "-k", "1", "--rounds", "1",
                         "--repairs", "0", "-m", "x"], capsys)
    assert code == 0, out
    assert lab.jobs["r1-k0"].task == "my_silu" and lab.jobs["r1-k0"].task_file == "task/my_task.py"
    assert (run / "task" / "my_task.cu").read_text() == MY_BASE
    assert json.loads((run / "candidates" / "r1-k0" / "job.json").read_text())["task_file"] == "task/my_task.py"


def test_optimize_against_an_openai_compatible_endpoint_on_loopback(tmp_path, capsys, monkeypatch):
    """The real client over HTTP: every role's request reaches the endpoint and its reply drives the loop."""
    from triforge.testing.fake_server import FakeOpenAIServer

    script = [
        {"tool_calls": [{"name": "add_test_shape", "arguments": {"shape": {"num_tokens": 2, "d": 4101}, "why": "odd"}}]},
        # a reply whose tool call leaked into the content, as small models write it
        {"fault": "leak", "tool_calls": [{"name": "finish_tests", "arguments": {"summary": "odd d"}}]},
        {"tool_calls": [{"name": "submit_analysis", "arguments": {"analysis": "memory bound"}}]},
        {"tool_calls": [{"name": "submit_plans", "arguments": {"plans": [
            {"title": "vectorize", "change": "uint4 loads", "predicted_effect": "x1.5"}]}}]},
        {"tool_calls": [{"name": "submit_kernel", "arguments": {"code": kernel("correct x1.5")}}]},
    ]
    lab = FakeLab()
    monkeypatch.setattr(astra_optimize, "make_evaluator", lambda later, gpus: lab)
    run = tmp_path / "run"
    with FakeOpenAIServer(script) as srv:
        code, out = run_cli(["astra", "optimize", "--task", "silu_and_mul", "--out", str(run), "-k", "1", "--rounds", "1",
                             "--repairs", "0", "--model", "fake-model", "--base-url", srv.base_url,
                             "--max-calls", "10"], capsys)
        assert srv.remaining == 0
    assert code == 0, out
    assert "best r1-k0" in out
    assert lab.jobs["r1-k0"].extra_shapes == [{"num_tokens": 2, "d": 4101}]
    assert json.loads((run / "results.json").read_text())["spend"]["calls"] == 5


def test_a_run_directory_of_another_task_file_is_not_overwritten(tmp_path, capsys, no_models):
    run = tmp_path / "run"
    (run / "task").mkdir(parents=True)
    (run / "task" / "my_task.py").write_text("# another run's task\n")
    tf = write_task(tmp_path)
    code, out = run_cli(["astra", "optimize", "--task-file", str(tf), "--out", str(run), "-m", "x"], capsys)
    assert code == 2 and "holds a different my_task.py" in out
    assert (run / "task" / "my_task.py").read_text() == "# another run's task\n"
