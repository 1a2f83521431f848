"""`triforge maestro optimize` and `compare` as a user runs them, against the fake server over loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from triforge.maestro.placeholder_replies import reply as task_reply
from triforge.maestro.program import Program
from triforge.maestro.programs import seed_program
from triforge.testing.fake_server import FakeOpenAIServer


def triforge(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "triforge.cli.app", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def reply(request):
    """Task nodes get placeholder fields; reflection prompts get an instruction or a valid edit."""
    msgs = request.get("messages", [])
    first = str(msgs[0].get("content", "")) if msgs else ""
    if msgs and msgs[0].get("role") == "user":
        if first.startswith("You improve the structure"):
            return json.dumps({"rationale": "look again", "edits": [
                {"op": "add_retrieval", "target": "answer", "node": {"name": "hop3", "query": "question", "k": 2}}]})
        return "<instruction>Answer with a short factoid.</instruction>"
    return task_reply(request)


class Flaky:
    """Healthy until `fail_after` requests, then HTTP 500 until healed."""

    def __init__(self, fail_after: int | None) -> None:
        self.fail_after, self.n, self.lock = fail_after, 0, threading.Lock()

    def __call__(self, request):
        with self.lock:
            self.n += 1
            broken = self.fail_after is not None and self.n > self.fail_after
        return {"fault": 500} if broken else reply(request)


def _args(srv, out, *extra):
    return ("maestro", "optimize", "--bench", "hotpotqa", "--model", "fake-model", "--base-url", srv.base_url,
            "--max-rollouts", "40", "--out", str(out), "--jobs", "2", *extra)


def test_optimize_writes_the_run_directory_and_resumes_by_replay(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAIServer(reply) as srv:
        r = triforge(*_args(srv, out), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "rollouts" in r.stdout and "maestro: test" in r.stdout
        # the final test evaluation (seed and best on the test split) is not silent without a terminal
        n_test = json.loads((out / "results.json").read_text())["summary"]["n_test"]
        final = [x for x in r.stderr.splitlines() if "maestro final test" in x]
        assert any("seed program" in x for x in final) and any("best program" in x for x in final), r.stderr
        assert any(f"rollout {2 * n_test} of {2 * n_test}" in x for x in final), r.stderr
        n = len(srv.requests)
        log = (out / "proposals.jsonl").read_bytes()
        summary = json.loads((out / "results.json").read_text())["summary"]
        assert summary["spent"]["search_rollouts"] <= 40 and summary["spent"]["calls"]["reflection"] > 0
        html = (out / "report.html").read_text()
        assert "<svg" in html and "flowchart TD" in html and "http" not in html.split("<body>")[1].split("<h2>")[0]
        assert Program.load(out / "best_program.json").name == seed_program("hotpotqa").name
        props = [json.loads(x) for x in log.splitlines()]
        assert any(p["step"] == "graph" for p in props) and any(p["step"] == "config" for p in props)
        assert all(p["minibatch_ids"] for p in props)
        r = triforge(*_args(srv, out), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert len(srv.requests) == n  # every call answered from the run's cache
        assert (out / "proposals.jsonl").read_bytes() == log


def test_an_endpoint_failing_mid_run_stops_cleanly_and_a_rerun_resumes_to_the_same_result(tmp_path):
    with FakeOpenAIServer(reply) as srv:
        assert triforge(*_args(srv, tmp_path / "whole"), cwd=tmp_path).returncode == 0
    flaky = Flaky(fail_after=60)
    with FakeOpenAIServer(flaky) as srv:
        r = triforge(*_args(srv, tmp_path / "cut"), cwd=tmp_path)
        assert r.returncode == 2 and "re-run the same command to resume" in r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 3
        flaky.fail_after = None
        r = triforge(*_args(srv, tmp_path / "cut"), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    for f in ("proposals.jsonl", "best_program.json"):
        assert (tmp_path / "cut" / f).read_bytes() == (tmp_path / "whole" / f).read_bytes(), f


@pytest.mark.parametrize("change,message", [
    (("--bench", "nope"), "unknown benchmark"),
    (("--optimizer", "adam"), "unknown optimizer"),
    (("--program", "no_such_seed"), "program 'no_such_seed'"),
    (("--limits", "1,2"), "--limits"),
    (("--max-rollouts", "3"), "--max-rollouts 3 cannot cover"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, change, message):
    args = ["maestro", "optimize", "--bench", "hotpotqa", "--model", "fake-model", "--base-url",
            "http://127.0.0.1:9/v1", "--max-rollouts", "40", "--out", str(tmp_path / "o")]
    i = args.index(change[0]) if change[0] in args else None
    if i is not None:
        args[i + 1] = change[1]
    else:
        args += list(change)
    with FakeOpenAIServer(reply) as srv:
        args[args.index("--base-url") + 1] = srv.base_url
        r = triforge(*args, cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_program_failing_its_type_check_is_refused(tmp_path):
    p = seed_program("hotpotqa").to_dict()
    p["edges"] = [e for e in p["edges"] if e["src"] != "hop1"]  # summarize_1 is now unreachable ...
    p["entry"] = "create_query_2"  # ... and the entry reads summary_1 before anything writes it
    (tmp_path / "bad.json").write_text(json.dumps(p))
    r = triforge("maestro", "optimize", "--bench", "hotpotqa", "--program", str(tmp_path / "bad.json"), "--model",
                 "m", "--base-url", "http://127.0.0.1:9/v1", "--max-rollouts", "40", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "fails its type check" in r.stderr and "summary_1" in r.stderr, r.stderr


def test_compare_runs_every_optimizer_on_the_same_splits_and_prints_one_table(tmp_path):
    pytest.importorskip("gepa")
    pytest.importorskip("optuna")
    with FakeOpenAIServer(reply) as srv:
        r = triforge("maestro", "compare", "--optimizers", "maestro,config-only,gepa,mipro", "--bench", "hotpotqa",
                     "--model", "fake-model", "--base-url", srv.base_url, "--max-rollouts", "30", "--out",
                     str(tmp_path / "cmp"), "--jobs", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    table = (tmp_path / "cmp" / "compare.md").read_text()
    assert table.startswith("| optimizer") and table.count("\n| ") == 4  # one row per optimizer
    assert "MIPROv2 method (our implementation)" in table and "GEPA (the gepa package" in table
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [x["optimizer"] for x in rows] == ["maestro", "config-only", "gepa", "mipro"]
    assert all(x["spent"]["search_rollouts"] <= 30 for x in rows)


def test_a_killed_run_resumes_to_the_same_result(tmp_path):
    import os
    import signal
    import time

    with FakeOpenAIServer(reply) as srv:
        assert triforge(*_args(srv, tmp_path / "whole"), cwd=tmp_path).returncode == 0
    with FakeOpenAIServer(reply, delay_s=0.02) as srv:
        out = tmp_path / "killed"
        proc = subprocess.Popen([sys.executable, "-m", "triforge.cli.app", *_args(srv, out)], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log = out / "proposals.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if log.is_file() and len(log.read_text().splitlines()) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert not (out / "results.json").exists()
        r = triforge(*_args(srv, out), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    for f in ("proposals.jsonl", "best_program.json"):
        assert (out / f).read_bytes() == (tmp_path / "whole" / f).read_bytes(), f


@pytest.mark.parametrize("bench,data,limits", [
    ("ifbench", "ifbench", "6,3,3"),
    ("hotpotqa", "hotpotqa-hard-500", "6,3,3"),
])
def test_compare_on_the_real_data_sets(tmp_path, bench, data, limits):
    pytest.importorskip("gepa")
    pytest.importorskip("optuna")
    with FakeOpenAIServer(reply) as srv:
        r = triforge("maestro", "compare", "--optimizers", "maestro,gepa,mipro", "--bench", bench, "--data",
                     data, "--limits", limits, "--model", "fake-model", "--base-url", srv.base_url,
                     "--max-rollouts", "15", "--out", str(tmp_path / "cmp"), "--jobs", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [x["n_test"] for x in rows] == [3, 3, 3] and all(x["spent"]["search_rollouts"] <= 15 for x in rows)
