"""`triforge cpagent refs|grade` and graded programs: verdicts, exit codes, isolation."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from triforge.cli.cpagent import app
from triforge.cpagent.grader import grade_program
from triforge.cpagent.refs import RefCache

runner = CliRunner()

QUEENS = '''# Data
n = 10
# End of data
import json


def place(n):
    cols = []

    def ok(c):
        r = len(cols)
        return all(c != cc and abs(c - cc) != r - i for i, cc in enumerate(cols))

    def bt():
        if len(cols) == n:
            return True
        for c in range(1, n + 1):
            if ok(c):
                cols.append(c)
                if bt():
                    return True
                cols.pop()
        return False

    bt()
    return cols


print(json.dumps({"queens": place(n)}))
'''


@pytest.fixture()
def queens(problems):
    return problems["csplib_054_n_queens"]


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_grade_cli_correct_program_on_all_instances(cpbench_dir, tmp_path):
    prog = _write(tmp_path, "queens.py", QUEENS)
    res = runner.invoke(app, ["grade", "--data", str(cpbench_dir), "--problem", "csplib_054_n_queens",
                              "--submission", str(prog), "--all-instances", "--json"])
    assert res.exit_code == 0, res.output
    verdicts = json.loads(res.output)
    assert [v["instance"] for v in verdicts] == [0, 1, 2, 3, 4, 5]
    assert all(v["verdict"] == "correct" for v in verdicts)
    assert "no network" in verdicts[0]["isolation"] or "NOT isolated" in verdicts[0]["isolation"]


def test_grade_cli_wrong_json_file_exits_1_with_reasons(cpbench_dir, tmp_path):
    sol = _write(tmp_path, "sol.json", json.dumps({"queens": list(range(1, 11))}))
    res = runner.invoke(app, ["grade", "--data", str(cpbench_dir), "--problem", "csplib_054_n_queens",
                              "--submission", str(sol)])
    assert res.exit_code == 1
    assert "incorrect" in res.output and "violate" in res.output


def test_grade_cli_unknown_problem_is_a_user_error(cpbench_dir, tmp_path):
    from triforge.core.errors import UserError

    sol = _write(tmp_path, "sol.json", "{}")
    res = runner.invoke(app, ["grade", "--data", str(cpbench_dir), "--problem", "csplib_054_nqueens",
                              "--submission", str(sol)])
    assert isinstance(res.exception, UserError) and "csplib_054_n_queens" in str(res.exception)


def test_refs_cli_table_summary_and_json(cpbench_dir, tmp_path):
    out = tmp_path / "refs.json"
    res = runner.invoke(app, ["refs", "--data", str(cpbench_dir), "--problem", "abbots_puzzle",
                              "--problem", "csplib_054_n_queens", "--jobs", "2", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "7/7 reference runs as expected over 2 problems" in res.output
    data = json.loads(out.read_text())
    assert len(data["results"]) == 7 and all(r["ok"] for r in data["results"])


def test_program_verdicts_error_timeout_no_output(queens, tmp_path):
    cache = RefCache(tmp_path / "cache")
    crash = _write(tmp_path, "crash.py", "raise SystemExit('boom')\n")
    silent = _write(tmp_path, "silent.py", "x = 1\n")
    chatty = _write(tmp_path, "chatty.py", QUEENS.replace('print(json.dumps(', 'print("answer:", json.dumps('))
    hang = _write(tmp_path, "hang.py", "while True:\n    pass\n")
    assert grade_program(queens, crash, cache=cache)[0].verdict == "error"
    assert grade_program(queens, silent, cache=cache)[0].verdict == "no_output"
    assert grade_program(queens, chatty, cache=cache)[0].verdict == "incorrect"
    quick = replace(queens, timeout_s=2.0)
    (v,) = grade_program(quick, hang, cache=cache)
    assert v.verdict == "timeout" and v.run_s < 10


def test_program_without_data_block_answers_other_instances_through_its_own_assignments(queens, tmp_path):
    prog = _write(tmp_path, "fixed.py", QUEENS.replace("# Data\n", "").replace("# End of data\n", ""))
    v0, v1 = grade_program(queens, prog, [0, 1], cache=RefCache(tmp_path / "cache"))
    assert v0.correct and v1.correct, (v0.reasons, v1.reasons)
    assert len(v1.solution["queens"]) == queens.instances[1]["n"]
    assert any("put into its own assignments of n (line 1)" in n for n in v1.notes), v1.notes
    # Not a CPMpy program: its model cannot be captured, and the verdict says it rests on the printed solution.
    assert v0.model_check["soundness"] == "not_checked" and "never called solve()" in v0.model_check["coverage"]


def test_submissions_are_confined(queens, tmp_path):
    """No network, no writing outside a size limit, a scrubbed environment, a fresh working folder."""
    from triforge.cpagent.program_run import Limits, run_python

    probe = '''
import json, os, socket
out = {"cwd_empty": os.listdir(".") == ["submission.py"], "secret": os.environ.get("SECRET_TOKEN")}
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    out["net"] = "connected"
except OSError as e:
    out["net"] = type(e).__name__
try:
    with open("big", "wb") as f:
        f.write(b"x" * (80 << 20))
    out["big_file"] = "written"
except OSError as e:
    out["big_file"] = type(e).__name__
print(json.dumps(out))
'''
    import os

    os.environ["SECRET_TOKEN"] = "do-not-leak"
    try:
        res, iso = run_python(probe, Limits(wall_s=20))
    finally:
        del os.environ["SECRET_TOKEN"]
    out = json.loads(res.stdout)
    assert out["cwd_empty"] and out["secret"] is None
    assert out["big_file"] != "written"
    assert out["net"] != "connected" and "no network" in iso  # unisolated programs are refused, never run
