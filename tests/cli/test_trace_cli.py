"""`triforge trace summary|view` from the command line: bad traces, file paths, 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from triforge.core.config import ModelConfig
from triforge.core.llm import Completion, Usage
from triforge.core.trace import Tracer, agent_scope

LONG_AGENT = "cpagent-solver-for-a-problem-with-a-very-long-name"
LONG_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m-with-a-long-alias"


def triforge(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "triforge.cli.app", *args], capture_output=True, text=True,
                          timeout=60, env=env, stdin=subprocess.DEVNULL)


@pytest.fixture
def run(tmp_path) -> Path:
    t = Tracer(tmp_path / "run")
    with agent_scope(LONG_AGENT):
        comp = Completion(content="ok", usage=Usage(123456, 7890), model=LONG_MODEL)
        t.llm_span(LONG_MODEL, ModelConfig(model=LONG_MODEL, base_url="http://127.0.0.1:1/v1"), {"messages": []},
                   comp, 12.3, 1)
        t.tool_span("python_exec", {"code": "print(1)"}, "1", 1.0)
    return tmp_path / "run"


def test_summary_fits_80_columns_without_cutting_names(run):
    r = triforge("trace", "summary", str(run))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    squashed = "".join(ln.split()[0] for ln in lines if ln.strip())  # the name column, folded pieces joined
    assert LONG_AGENT in squashed and LONG_MODEL in squashed and "…" not in r.stdout
    model_row = next(ln for ln in lines if ln.strip().startswith(LONG_MODEL[:8]))
    assert model_row.split()[1:4] == ["1", "1", "123,456"]  # LLM calls, tool calls (counted for the model), tokens


def test_summary_accepts_the_trace_file_itself(run):
    r = triforge("trace", "summary", str(run / "trace.jsonl"))
    assert r.returncode == 0 and "has no trace.jsonl" not in r.stderr


def test_summary_of_a_corrupt_trace_is_one_line_exit_2(run):
    with (run / "trace.jsonl").open("a") as f:
        f.write("this is not json\n{}\n")
    for cmd in ("summary", "view"):
        r = triforge("trace", cmd, str(run))
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.count("\n") == 1 and "line 3 is not a triforge span" in r.stderr and "Traceback" not in r.stderr


def test_a_trace_holding_several_runs_says_so(run):
    assert "runs appended" not in triforge("trace", "summary", str(run)).stdout
    Tracer(run).tool_span("python_exec", {"code": "print(2)"}, "2", 1.0)  # a resumed run appends its own spans
    text = " ".join(triforge("trace", "summary", str(run)).stdout.split())
    assert "this trace holds 2 runs appended one after another" in text and "totals cover all" in text


def test_a_folder_of_runs_points_at_the_runs_inside_it(run, tmp_path):
    bench = tmp_path / "bench"
    (bench / "problems" / "p" / "seed0").mkdir(parents=True)
    (bench / "problems" / "p" / "seed0" / "trace.jsonl").write_bytes((run / "trace.jsonl").read_bytes())
    (bench / "problems" / "q" / "seed0").mkdir(parents=True)
    (bench / "problems" / "q" / "seed0" / "trace.jsonl").write_bytes((run / "trace.jsonl").read_bytes())
    r = triforge("trace", "summary", str(bench))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"e.g. {bench / 'problems' / 'p' / 'seed0'} and 1 more" in r.stderr
    r = triforge("trace", "summary", str(bench / "problems" / "p" / "seed0"))
    assert r.returncode == 0, r.stderr
