"""`cpagent bench` and `solve --data` end to end against the fake server with strict grading."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from triforge.core.config import ModelConfig
from triforge.core.llm import OpenAICompatLLM
from triforge.cpagent.bench import run_bench
from triforge.cpagent.task import task_from_problem
from triforge.testing.cp_scripts import reference_submitter
from triforge.testing.fake_server import FakeOpenAIServer

IDS = ["abbots_puzzle", "among", "added_corners"]


@pytest.fixture(scope="module")
def problems(shared_data):
    from triforge.cpagent.dataset import load_problem

    return [load_problem(shared_data / "dcp-bench-open", pid) for pid in IDS]


def test_bench_grades_resumes_and_reports(tmp_path, problems):
    tasks = [task_from_problem(p) for p in problems]
    out = tmp_path / "bench"
    reply = reference_submitter(problems)
    calls = {"n": 0}

    def flaky(body):  # the endpoint dies for one problem: that run stops, the others go on
        if "Requires exactly m values in x" in body["messages"][1]["content"]:  # the `among` problem
            return {"fault": "500"}
        calls["n"] += 1
        return reply(body)

    with FakeOpenAIServer(flaky) as srv:
        llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url, max_retries=0))
        summary = run_bench(tasks, llm, out, jobs=2)
    assert summary["grades"] == {"correct": 2, "not_submitted": 1}
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert runs["among#seed0"]["status"] == "endpoint_error"
    for f in ("report.md", "report.html", "results.json", "config.json"):
        assert (out / f).is_file()
    assert "<svg" in (out / "report.html").read_text()

    with FakeOpenAIServer(reply) as srv:  # resume: only the unfinished problem runs again
        llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url))
        summary = run_bench(tasks, llm, out, jobs=2)
        assert len(srv.requests) == 2
    assert summary["pass_at_1"] == 1.0 and summary["grades"] == {"correct": 3}


def test_cli_solve_with_data_is_graded(tmp_path, problems, shared_data):
    with FakeOpenAIServer(reference_submitter(problems)) as srv:
        r = subprocess.run(
            [sys.executable, "-m", "triforge.cli.app", "cpagent", "solve", "--data", str(shared_data / "dcp-bench-open"),
             "--problem", "abbots_puzzle", "--model", "fake-model", "--base-url", srv.base_url, "--out",
             str(tmp_path / "s")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "grade: correct" in r.stdout
    rec = json.loads((tmp_path / "s" / "results.json").read_text())
    assert rec["grade"]["status"] == "correct" and (tmp_path / "s" / "trace.html").is_file()


def test_cli_unknown_problem_suggests_ids(tmp_path, shared_data):
    r = subprocess.run(
        [sys.executable, "-m", "triforge.cli.app", "cpagent", "solve", "--data", str(shared_data / "dcp-bench-open"),
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
