"""`cpagent bench` and `solve --data` end to end against the fake server with strict grading."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from triforge.core.budget import Budget, BudgetLimits
from triforge.core.config import ModelConfig
from triforge.core.llm import OpenAICompatLLM
from triforge.core.provenance import StaleResults
from triforge.core.react import AgentLimits
from triforge.cpagent.agent import CPAgentConfig
from triforge.cpagent.bench import run_bench
from triforge.cpagent.reference_replies import reference_submitter
from triforge.cpagent.task import task_from_problem
from triforge.testing.fake_server import FakeOpenAIServer

IDS = ["abbots_puzzle", "among", "added_corners"]


@pytest.fixture(scope="module")
def problems():
    from triforge.cpagent.dataset import load_problem

    return [load_problem(None, pid) for pid in IDS]  # the bundled set


def test_bench_grades_resumes_and_reports(tmp_path, problems):
    tasks = [task_from_problem(p) for p in problems]
    out = tmp_path / "bench"
    reply = reference_submitter(problems)
    down = {"among": True}

    def flaky(body):  # the endpoint dies for one problem: that run stops, the others go on
        if down["among"] and "Requires exactly m values in x" in body["messages"][1]["content"]:
            return {"fault": "500"}
        return reply(body)

    with FakeOpenAIServer(flaky) as srv:
        llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url, max_retries=0))
        summary = run_bench(tasks, llm, out, jobs=2)
        assert summary["grades"] == {"correct": 2, "not_submitted": 1}
        assert summary["unfinished"] == {"endpoint_error": ["among#seed0"]}
        runs = json.loads((out / "results.json").read_text())["runs"]
        assert runs["among#seed0"]["status"] == "endpoint_error"
        for f in ("report.md", "report.html", "results.json", "config.json", "provenance.json"):
            assert (out / f).is_file()
        assert "<svg" in (out / "report.html").read_text()
        for f in ("report.md", "report.html"):  # the report says the score is incomplete, and why
            assert "1 run(s) failed at the endpoint (among#seed0)" in (out / f).read_text()
        assert all(r["settings_hash"] == summary["settings_hash"] and "commit" in r and r["item_hash"]
                   for r in runs.values())

        down["among"] = False
        before = len(srv.requests)
        summary = run_bench(tasks, llm, out, jobs=2)  # resume: only the unfinished problem runs again
        assert len(srv.requests) - before == 2
    assert summary["pass_at_1"] == 1.0 and summary["grades"] == {"correct": 3} and not summary["unfinished"]
    assert "Incomplete" not in (out / "report.md").read_text()


def test_a_budget_stop_is_resumed_not_kept(tmp_path, problems):
    """A run stopped by the budget (and runs never started) are done on resume, when the budget allows."""
    tasks = [task_from_problem(p) for p in problems]
    out = tmp_path / "bench"
    with FakeOpenAIServer(reference_submitter(problems)) as srv:
        llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url, max_retries=0))
        summary = run_bench(tasks, llm, out, jobs=1, budget=Budget(BudgetLimits(max_calls=3)))
        assert len(srv.requests) == 3 and summary["grades"] == {"correct": 1, "not_submitted": 1, "missing": 1}
        assert summary["unfinished"] == {"budget_exceeded": ["among#seed0"], "not_run": ["added_corners#seed0"]}
        assert "stopped by the budget" in (out / "report.md").read_text()
        summary = run_bench(tasks, llm, out, jobs=1, budget=Budget(BudgetLimits(max_calls=10)))
        assert len(srv.requests) == 3 + 4
    assert summary["grades"] == {"correct": 3} and not summary["unfinished"]


def test_bench_resumes_only_with_the_same_settings_and_data(tmp_path, problems):
    tasks = [task_from_problem(p) for p in problems[:1]]
    out = tmp_path / "bench"
    with FakeOpenAIServer(reference_submitter(problems)) as srv:
        cfg = ModelConfig(model="fake-model", base_url=srv.base_url, max_retries=0)
        run_bench(tasks, OpenAICompatLLM("fake", cfg), out)
        n = len(srv.requests)
        for change in ({"model": "other"}, {"extra_body": {"top_k": 2}}):
            with pytest.raises(StaleResults, match=r"\(model\.\w+ differs\); use a new --out or --fresh"):
                run_bench(tasks, OpenAICompatLLM("fake", cfg.model_copy(update=change)), out)
        with pytest.raises(StaleResults, match=r"agent\.limits differs"):
            run_bench(tasks, OpenAICompatLLM("fake", cfg), out, config=CPAgentConfig(limits=AgentLimits(max_steps=3)))
        with pytest.raises(StaleResults, match=r"agent\.project_prompt, prompts\.project differ\)"):
            prompt = tmp_path / "p.md.j2"
            prompt.write_text("Solve it. Keys: {{ output_keys | join(', ') }}")
            run_bench(tasks, OpenAICompatLLM("fake", cfg), out, config=CPAgentConfig(project_prompt=prompt))
        edited = [replace(tasks[0], description=tasks[0].description + " (edited)")]
        with pytest.raises(StaleResults, match="data that has changed since .abbots_puzzle#seed0"):
            run_bench(edited, OpenAICompatLLM("fake", cfg), out)
        assert len(srv.requests) == n  # nothing was asked or served for other settings
        again = run_bench([*tasks, task_from_problem(problems[1])], OpenAICompatLLM("fake", cfg), out)
        assert again["grades"] == {"correct": 2} and len(srv.requests) == n + 2  # more problems: resumes
        moved = run_bench(tasks, OpenAICompatLLM("fake", cfg.model_copy(update={"model": "other"})), out, fresh=True)
    assert moved["grades"] == {"correct": 1} and Path(moved["moved_aside"]).parent == out
    assert (Path(moved["moved_aside"]) / "results.json").is_file()


def test_cli_bench_against_a_failing_endpoint_exits_non_zero_and_says_so(tmp_path):
    examples = Path(__file__).resolve().parents[2] / "examples" / "cpbench"
    with FakeOpenAIServer(lambda body: {"fault": "500"}) as srv:
        (tmp_path / "triforge.toml").write_text(
            f'[models.down]\nmodel = "m"\nbase_url = "{srv.base_url}"\nmax_retries = 0\n')
        r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "cpagent", "bench", "--data", str(examples),
                            "--model", "down", "--out", str(tmp_path / "b")], capture_output=True, text=True,
                           timeout=180, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "failed at the endpoint" in r.stderr and "resume" in r.stderr and "Traceback" not in r.stderr
    assert "failed at the endpoint" in (tmp_path / "b" / "report.md").read_text()


@pytest.mark.parametrize("data", [[], ["--data", "dcp-bench-open"]], ids=["bundled-default", "by-name"])
def test_cli_solve_with_data_is_graded(tmp_path, problems, data):
    with FakeOpenAIServer(reference_submitter(problems)) as srv:
        r = subprocess.run(
            [sys.executable, "-m", "triforge.cli.app", "cpagent", "solve", *data, "--problem", "abbots_puzzle", "--model", "fake-model", "--base-url", srv.base_url, "--out",
             str(tmp_path / "s")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "grade: correct" in r.stdout
    rec = json.loads((tmp_path / "s" / "results.json").read_text())
    assert rec["grade"]["status"] == "correct" and (tmp_path / "s" / "trace.html").is_file()


def test_cli_unknown_problem_suggests_ids(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "triforge.cli.app", "cpagent", "solve",
         "--problem", "abbot_puzzle", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "abbots_puzzle" in r.stderr and "Traceback" not in r.stderr


def test_cli_endpoint_down_keeps_run_dir(tmp_path):
    f = tmp_path / "p.md"
    f.write_text("Pick x in 1..3.\nOutput keys: x\n")
    (tmp_path / "triforge.toml").write_text('[models.down]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nmax_retries = 0\n')
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "cpagent", "solve", "--file", str(f), "--model", "down",
                        "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "resume" in r.stdout
    assert json.loads((tmp_path / "run" / "results.json").read_text())["status"] == "endpoint_error"


def test_cli_main_job_flags_with_a_text_protocol_model(tmp_path):
    """The main job's command line (text protocol, the weak-model aids) against the fake server: the model
    invents a tool response (cut off), repeats itself (re-asked), and its self-contained cell that prints the
    solution is handed in automatically and graded correct on every instance."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "cpbench"
    program = ("# Data\ntotal = 12\ndiff = 2\n# End of data\nimport json\nimport cpmpy as cp\n"
               "x, y = cp.intvar(0, total, shape=2, name=['x', 'y'])\nm = cp.Model(x + y == total, x - y == diff)\n"
               "assert m.solve()\nprint(json.dumps({'x': int(x.value()), 'y': int(y.value())}))\n")
    broken = "```python\nprint(x)\n```"
    script = [broken + '\n<tool_response name="python_exec">\n7\n</tool_response>\nSo x is 7.', broken,
              f"Here is the model.\n```python\n{program}```"]
    with FakeOpenAIServer(script) as srv:
        (tmp_path / "triforge.toml").write_text(
            f'[models.weak]\nmodel = "m"\nbase_url = "{srv.base_url}"\nnative_tools = false\nmax_retries = 0\n')
        r = subprocess.run(
            [sys.executable, "-m", "triforge.cli.app", "cpagent", "solve", "--data", str(examples), "--problem",
             "two_numbers", "--model", "weak", "--out", str(tmp_path / "run"), "--max-steps", "6",
             "--profile", "small-model"], capture_output=True, text=True, timeout=180, cwd=tmp_path)
        assert all(body["stop"] == ["<tool_response", "```output"] for body in srv.requests)
        assert [b.get("temperature") for b in srv.requests] == [None, None, 0.8]
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads((tmp_path / "run" / "results.json").read_text())
    assert rec["grade"]["status"] == "correct" and rec["auto_submitted"]
    assert (rec["cut_replies"], rec["resampled"], rec["steps"]) == (1, 1, 2)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["small_model"]["forget_repeats"] is True


def test_cli_profile_is_recorded_and_an_unknown_one_is_one_line(tmp_path):
    f = tmp_path / "p.md"
    f.write_text("Pick x in 1..3.\nOutput keys: x\n")
    (tmp_path / "triforge.toml").write_text('[models.down]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nmax_retries = 0\n')
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "cpagent", "solve", "--file", str(f), "--model", "down",
                        "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert json.loads((tmp_path / "run" / "config.json").read_text())["small_model"] is None  # the default
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "cpagent", "solve", "--file", str(f), "--model", "down",
                        "--profile", "tiny", "--out", str(tmp_path / "run2")], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "unknown profile 'tiny'" in r.stderr and "Traceback" not in r.stderr
