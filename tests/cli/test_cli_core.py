"""The CLI as a user runs it: exit codes, one-line errors, the demo, chat against the fake server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from triforge.testing.fake_server import FakeOpenAIServer


def triforge(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "triforge.cli.app", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def test_version():
    r = triforge("--version")
    assert r.returncode == 0 and r.stdout.startswith("triforge ")


def test_demo_leaves_a_full_run_directory(tmp_path):
    out = tmp_path / "demo"
    r = triforge("demo", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "scripted" in r.stdout
    for name in ("trace.jsonl", "results.json", "trace.html", "report.md", "config.json"):
        assert (out / name).is_file(), name
    results = json.loads((out / "results.json").read_text())
    assert results["correct"] is True and results["answer"] == "338350"
    r = triforge("trace", "summary", str(out))
    assert r.returncode == 0 and "demo" in r.stdout


def test_chat_against_fake_server(tmp_path):
    with FakeOpenAIServer([{"content": "pong!", "usage": {"input_tokens": 4, "output_tokens": 2}}]) as srv:
        r = triforge("llm", "chat", "--model", "fake-model", "--base-url", srv.base_url, "ping?", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "pong!" and "4 in, 2 out" in r.stderr


def test_ping_reports_tool_support(tmp_path):
    script = ["pong", {"tool_calls": [{"name": "get_time", "arguments": {"city": "Paris"}}]}]
    with FakeOpenAIServer(script) as srv:
        r = triforge("llm", "ping", "--model", "fake-model", "--base-url", srv.base_url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "native tool call" in r.stdout


def test_bad_input_is_one_line_exit_2(tmp_path):
    r = triforge("llm", "chat", "--model", "nope", "hi", cwd=tmp_path)
    assert r.returncode == 2 and "unknown model alias 'nope'" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "triforge.toml").write_text("models = 3 = 4")
    r = triforge("llm", "chat", "--model", "x", "hi", cwd=tmp_path)
    assert r.returncode == 2 and "not valid TOML" in r.stderr and "Traceback" not in r.stderr
    r = triforge("--debug", "llm", "chat", "--model", "x", "hi", cwd=tmp_path)
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_unreachable_endpoint_exit_2(tmp_path):
    (tmp_path / "triforge.toml").write_text('[models.down]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
                                            'max_retries = 0\n')
    r = triforge("llm", "chat", "--model", "down", "hi", cwd=tmp_path)
    assert r.returncode == 2 and "unreachable" in r.stderr


def test_trace_view_of_missing_dir(tmp_path):
    r = triforge("trace", "view", str(tmp_path / "nope"))
    assert r.returncode == 2 and "no trace.jsonl" in r.stderr
