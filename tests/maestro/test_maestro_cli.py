"""`triforge maestro run` and `show` as a user runs them, against the fake server over loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from triforge.maestro.placeholder_replies import reply
from triforge.maestro.program import Program
from triforge.maestro.programs import seed_program
from triforge.testing.fake_server import FakeOpenAIServer


def triforge(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "triforge.cli.app", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_show_prints_text_mermaid_and_files(tmp_path):
    r = triforge("maestro", "show", "hotpotqa")
    assert r.returncode == 0 and "hop1" in r.stdout and seed_program("hotpotqa").hash in r.stdout
    r = triforge("maestro", "show", "hotpotqa", "--format", "mermaid")
    assert r.stdout.startswith("flowchart TD") and "n_hop2" in r.stdout
    r = triforge("maestro", "show", "ifbench", "--format", "toml")
    (tmp_path / "p.toml").write_text(r.stdout)
    assert Program.load(tmp_path / "p.toml") == seed_program("ifbench")
    r = triforge("maestro", "show", str(tmp_path / "p.toml"), "--format", "json")
    assert Program.from_json(r.stdout) == seed_program("ifbench")
    r = triforge("maestro", "show", "nonsense")
    assert r.returncode == 2 and "error:" in r.stderr and "Traceback" not in r.stderr


def test_run_writes_results_and_traces_and_resumes(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAIServer(reply) as srv:
        args = ("maestro", "run", "--bench", "hotpotqa", "--split", "val", "--model", "fake-model",
                "--base-url", srv.base_url, "--out", str(out), "--jobs", "4")
        r = triforge(*args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        n_requests = len(srv.requests)
        assert n_requests == 5 * 4  # 5 val questions x 4 llm nodes
        lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
        assert len(lines) == 5 and all(x["score"] == 0 and x["error"] is None for x in lines)
        assert [t["node"] for t in lines[0]["trace"]] == ["hop1", "summarize_1", "create_query_2", "hop2",
                                                          "summarize_2", "answer"]
        assert lines[0]["trace"][1]["llm_calls"][0]["reply"]
        assert "gold answer" in lines[0]["feedback"]
        summary = json.loads((out / "results.json").read_text())["summary"]
        assert summary["n"] == 5 and summary["mean_score"] == 0.0
        assert (out / "trace.jsonl").stat().st_size > 0 and (out / "report.md").is_file()
        assert Program.load(out / "program.json") == seed_program("hotpotqa")
        r = triforge(*args, "--html", cwd=tmp_path)  # resume: nothing is re-run
        assert r.returncode == 0 and len(srv.requests) == n_requests and "5 from earlier runs" in r.stdout
        assert (out / "trace.html").is_file()


def test_run_program_file_with_planted_parse_failures(tmp_path):
    prog = seed_program("hotpotqa")
    path = prog.save(tmp_path / "prog.toml")

    def sometimes_bad(body):
        user = body["messages"][-1]["content"]
        return "unparseable" if "Korvanne" in user and "<summary_1>" in user else reply(body)

    with FakeOpenAIServer(sometimes_bad) as srv:
        r = triforge("maestro", "run", "--program", str(path), "--bench", "hotpotqa", "--split", "all",
                     "--model", "m", "--base-url", srv.base_url, "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = {x["example_id"]: x for x in map(json.loads, (tmp_path / "o" / "results.jsonl").read_text().splitlines())}
    assert len(rows) == 20 and rows["mini-04"]["error_kind"] == "parse" and rows["mini-04"]["score"] == 0
    assert sum(1 for x in rows.values() if x["error"]) == 1


def test_run_reports_a_dead_endpoint_and_bad_options(tmp_path):
    with FakeOpenAIServer([{"fault": "401"}] * 50) as srv:
        r = triforge("maestro", "run", "--bench", "hotpotqa", "--limit", "2", "--model", "m",
                     "--base-url", srv.base_url, "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 2 and "every example failed at the endpoint" in r.stderr
    r = triforge("maestro", "run", "--bench", "nope", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                 "--out", str(tmp_path / "o2"), cwd=tmp_path)
    assert r.returncode == 2 and "unknown benchmark 'nope'" in r.stderr
    r = triforge("maestro", "run", "--bench", "hotpotqa", "--split", "dev", "--model", "m", "--base-url",
                 "http://127.0.0.1:9/v1", "--out", str(tmp_path / "o3"), cwd=tmp_path)
    assert r.returncode == 2 and "unknown HotpotQA split 'dev'" in r.stderr


def test_score_command_is_mounted():
    r = triforge("maestro", "score", "--help")
    assert r.returncode == 0 and "--responses" in r.stdout


def test_run_stops_cleanly_when_the_budget_is_spent(tmp_path):
    def priced(body):
        return {"content": reply(body), "usage": {"input_tokens": 1_000_000, "output_tokens": 0}}

    cfg = tmp_path / "triforge.toml"
    cfg.write_text('[models.pricey]\nmodel = "fake-model"\nprice_in_per_mtok = 1.0\n')
    with FakeOpenAIServer(priced) as srv:
        r = triforge("maestro", "run", "--bench", "hotpotqa", "--split", "all", "--jobs", "1", "--model",
                     "pricey", "--base-url", srv.base_url, "--budget-usd", "6", "--out", str(tmp_path / "o"),
                     cwd=tmp_path)
        assert r.returncode == 1 and "budget spent" in r.stderr and "Traceback" not in r.stderr
        assert len(srv.requests) == 6
    done = (tmp_path / "o" / "results.jsonl").read_text().splitlines()
    assert len(done) == 1  # the first example finished (4 calls); the second stopped mid-way
