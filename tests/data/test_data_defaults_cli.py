"""The benchmarks start on their bundled data, with no --data, from a folder outside the checkout (the fake
server over loopback stands in for the model)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from triforge.maestro.placeholder_replies import reply as task_reply
from triforge.testing.fake_server import FakeOpenAIServer


def triforge(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "triforge.cli.app", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_cpagent_bench_runs_the_bundled_problems_without_data(tmp_path):
    pytest.importorskip("cpmpy")
    from triforge.cpagent.dataset import load_problem
    from triforge.cpagent.reference_replies import reference_submitter

    ids = ["abbots_puzzle", "among"]
    with FakeOpenAIServer(reference_submitter([load_problem(None, pid) for pid in ids])) as srv:
        r = triforge("cpagent", "bench", *(a for pid in ids for a in ("--problem", pid)), "--model", "fake-model",
                     "--base-url", srv.base_url, "--out", "b", "--jobs", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads((tmp_path / "b" / "results.json").read_text())["summary"]
    assert summary["problems"] == 2 and summary["pass_at_1"] == 1.0, summary


def reply(request):
    msgs = request.get("messages", [])
    if msgs and msgs[0].get("role") == "user":  # a reflection prompt
        return "<instruction>Follow every constraint of the prompt exactly.</instruction>"
    return task_reply(request)


def test_maestro_optimize_on_ifbench_starts_without_data(tmp_path):
    with FakeOpenAIServer(reply) as srv:
        r = triforge("maestro", "optimize", "--bench", "ifbench", "--limits", "4,2,2", "--model", "fake-model",
                     "--base-url", srv.base_url, "--max-rollouts", "8", "--out", "o", "--jobs", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "o" / "best_program.json").is_file()
    from triforge.maestro.benchmarks.ifbench import load_ifbench

    bundled = {e.prompt for e in load_ifbench("ifbench")}
    sent = " ".join(str(m.get("content", "")) for req in srv.requests for m in req.get("messages", []))
    assert sum(p in sent for p in bundled) >= 4  # the bundled prompts reached the model
