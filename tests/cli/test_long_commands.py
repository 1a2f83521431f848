"""Long commands show progress without a terminal, and a finished run says it is one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from triforge.testing.fake_server import FakeOpenAIServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cpbench"
PROGRAM = ("# Data\ntotal = 12\ndiff = 2\n# End of data\nimport json\nimport cpmpy as cp\n"
           "x, y = cp.intvar(0, total, shape=2, name=['x', 'y'])\nm = cp.Model(x + y == total, x - y == diff)\n"
           "assert m.solve()\nprint(json.dumps({'x': int(x.value()), 'y': int(y.value())}))\n")
SCRIPT = [
    {"content": "First a look.", "tool_calls": [{"name": "python_exec", "arguments": {"code": "print(6 * 7)"}}]},
    {"content": "Submitting.", "tool_calls": [{"name": "submit", "arguments": {"code": PROGRAM}}]},
]


def _solve(base_url: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "triforge.cli.app", "cpagent", "solve", "--data", str(EXAMPLES), "--problem",
         "two_numbers", "--model", "m", "--base-url", base_url, "--out", str(out), "--max-steps", "6", *extra],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def test_solve_prints_a_line_per_step_without_a_terminal_and_a_rerun_says_it_is_finished(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAIServer(list(SCRIPT)) as srv:
        first = _solve(srv.base_url, out)
        assert first.returncode == 0, first.stdout + first.stderr
        lines = [ln.split("] ", 1)[1] for ln in first.stderr.splitlines() if "cpagent: step" in ln]
        heads = [ln.split(" · ")[0] for ln in lines]  # a line per step, and maybe heartbeats in between
        assert "cpagent: step 1 of 6" in heads and heads[-1] == "cpagent: step 2 of 6" and heads == sorted(heads)
        assert any("python_exec -> 42" in ln for ln in lines if ln.startswith("cpagent: step 2"))
        assert "\r" not in first.stderr
        assert "holds a finished run" not in first.stdout
        served = len(srv.requests)
        again = _solve(srv.base_url, out)
        assert len(srv.requests) == served  # nothing ran
    assert again.returncode == 0, again.stdout + again.stderr
    text = " ".join(again.stdout.split())
    assert "holds a finished run from 20" in text and "add --fresh" in text
    assert json.loads((out / "results.json").read_text())["grade"]["status"] == "correct"


def _demo(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "triforge.cli.app", "demo", "--out", str(out)],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_demo_twice_into_one_folder_starts_a_fresh_trace(tmp_path):
    from triforge.ui.trace_view import summarize

    out = tmp_path / "demo"
    assert _demo(out).returncode == 0
    again = _demo(out)
    assert again.returncode == 0 and "replaced the earlier demo run" in again.stdout
    results = json.loads((out / "results.json").read_text())
    assert summarize(out)["agent"]["demo"].calls == results["steps"] == 2  # not 4: the trace did not append


def test_demo_refuses_a_folder_holding_another_run(tmp_path):
    out = tmp_path / "other"
    out.mkdir()
    (out / "trace.jsonl").write_text("{}\n")
    (out / "config.json").write_text('{"task": "abbots_puzzle", "model": {"alias": "gpt"}}')
    r = _demo(out)
    assert r.returncode == 2 and "holds another run's trace" in r.stderr
    assert (out / "trace.jsonl").read_text() == "{}\n"  # nothing of the other run was touched


def test_bench_prints_a_line_per_finished_problem_without_a_terminal(tmp_path):
    from html_pages import scripted_bench

    r = scripted_bench(tmp_path / "bench")
    assert r.returncode in (0, 1), r.stdout + r.stderr  # one of the two runs hands in a wrong program
    lines = [ln.split("] ", 1)[1] for ln in r.stderr.splitlines() if "cpagent bench: problem" in ln]
    assert lines[0].startswith("cpagent bench: problem 0 of 2")  # the first heartbeat, a second in
    done = [ln for ln in lines if "two_numbers#seed" in ln]
    assert done[0].startswith("cpagent bench: problem 1 of 2 · two_numbers#seed0: correct")
    assert done[-1].startswith("cpagent bench: problem 2 of 2 · two_numbers#seed1: incorrect")
    assert "tok" in done[-1] and "\r" not in r.stderr
    report = (tmp_path / "bench" / "report.md").read_text()
    assert "| [two_numbers](problems/two_numbers/seed0/trace.html) |" in report  # each problem links to its trace


def test_solve_on_a_terminal_repaints_one_live_line(tmp_path):
    import os
    import pty

    master, slave = pty.openpty()
    with FakeOpenAIServer(list(SCRIPT)) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-m", "triforge.cli.app", "cpagent", "solve", "--data", str(EXAMPLES), "--problem",
             "two_numbers", "--model", "m", "--base-url", srv.base_url, "--out", str(tmp_path / "run"),
             "--max-steps", "6"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave,
            env={**os.environ, "TERM": "xterm"})
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=180) == 0
    os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    assert "\r\x1b[2Kcpagent: step 1 of 6" in text and "\r\x1b[2Kcpagent: step 2 of 6" in text
    assert "python_exec -> 42" in text and "] cpagent:" not in text  # a live line, not dated log lines
