"""Submitted programs in the styles LLM systems write, on DCP-Bench-Open problems (issue 25).

Derived values inside the `# Data` block, several data blocks, booleans printed as 0/1 (flat, nested, in an
optimisation problem): accepted when right, rejected when wrong; data that cannot be put in, CPMpy names the
installed CPMpy lacks and syntax errors are `error` saying so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from triforge.core.errors import UserError
from triforge.cpagent.grader import grade_program
from triforge.cpagent.refs import RefCache

APPOINTMENTS = '''import json

import cpmpy as cp

# Data
m = [
    [1, 1, 1, 1],
    [0, 1, 1, 0],
    [1, 0, 0, 1],
    [1, 0, 0, 1],
]
n_people = len(m)
n_slots = len(m[0])
# End of data
x = cp.boolvar(shape=(n_people, n_slots), name="x")
model = cp.Model()
for i in range(n_people):
    model += cp.sum([x[i, j] for j in range(n_slots) if m[i][j]]) == 1
    model += cp.sum(x[i, :]) == 1
for j in range(n_slots):
    model += cp.sum(x[:, j]) == 1
EXTRA
model.solve()
print(json.dumps({"x": [[int(x[i, j].value()) for j in range(n_slots)] for i in range(n_people)]}))
'''

BUDGET = '''import json

import cpmpy as cp

# Data
budget = 14000
# End of data

# Data
npv = [16000, 22000, 12000, 8000]
cash_flow = [5000, 7000, 4000, 3000]
n = len(npv)
# End of data

x = cp.boolvar(shape=n, name="x")
model = cp.Model(cp.sum(x * cash_flow) <= budget)
model.maximize(cp.sum(x * npv))
EXTRA
model.solve()
chosen = [int(v) for v in x.value()]
print(json.dumps({"z": int(model.objective_value()), "x": FLIP}))
'''

DIAMONDS = '''import json
from itertools import combinations

import cpmpy as cp

# Data
N = 10
V = list(range(N))
# End of data
g = cp.boolvar(shape=(N, N), name="g")
model = cp.Model([cp.sum(g[v, :]) > 0 for v in V], [cp.sum(g[v, :]) % 3 == 0 for v in V], cp.sum(g) % 12 == 0)
model += [g[v, v] == 0 for v in V]
model += [g[a, b] == g[b, a] for a, b in combinations(V, 2)]
for a, b, c, d in combinations(V, 4):
    model += cp.sum([g[a, b], g[a, c], g[a, d], g[b, c], g[b, d], g[c, d]]) <= 4
model.solve()
rows = g.value().astype(int).tolist()
FLIP
print(json.dumps({"matrix": rows}))
'''


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> RefCache:
    return RefCache(tmp_path_factory.mktemp("style-refs"))


def _grade(problems, tmp_path: Path, pid: str, text: str, instances=(0,), **kw):
    path = tmp_path / f"{pid}.py"
    path.write_text(text)
    return grade_program(problems[pid], path, list(instances), **kw)


def test_derived_values_in_the_data_block_and_nested_0_1(problems, tmp_path, cache):
    right = _grade(problems, tmp_path, "appointment_scheduling", APPOINTMENTS.replace("EXTRA", ""), cache=cache)[0]
    assert right.correct, right.reasons
    assert any("0/1 read as booleans for x" in n for n in right.notes)
    strict = _grade(problems, tmp_path, "appointment_scheduling", APPOINTMENTS.replace("EXTRA", ""), cache=cache,
                    strict_types=True)[0]
    assert strict.verdict == "incorrect" and "expected boolean" in strict.reasons[0]
    # A wrong 0/1 answer is still wrong: person 1 put in slot 0, where they are busy.
    wrong = APPOINTMENTS.replace("    model += cp.sum([x[i, j] for j in range(n_slots) if m[i][j]]) == 1\n", "")
    wrong = wrong.replace("EXTRA", "model += x[1, 0] == 1")
    v = _grade(problems, tmp_path, "appointment_scheduling", wrong, cache=cache)[0]
    assert v.verdict == "incorrect", v.reasons


def test_several_data_blocks_and_booleans_in_an_objective(problems, tmp_path, cache):
    right = BUDGET.replace("EXTRA", "").replace("FLIP", "chosen")
    v = _grade(problems, tmp_path, "capital_budget", right, cache=cache)[0]
    assert v.correct, v.reasons
    worse = BUDGET.replace("EXTRA", "model += x[1] == 0").replace("FLIP", "chosen")
    v = _grade(problems, tmp_path, "capital_budget", worse, cache=cache)[0]
    assert v.verdict == "incorrect" and "not optimal" in v.reasons[0], v.reasons
    flipped = BUDGET.replace("EXTRA", "").replace("FLIP", "[1 - c for c in chosen]")
    v = _grade(problems, tmp_path, "capital_budget", flipped, cache=cache)[0]
    assert v.verdict == "incorrect", v.reasons


def test_each_instance_goes_into_a_block_with_derived_values(problems, tmp_path, cache):
    vs = _grade(problems, tmp_path, "csplib_050_diamond_free", DIAMONDS.replace("FLIP", ""), (0, 1), cache=cache)
    assert [v.verdict for v in vs] == ["correct", "correct"], [v.reasons for v in vs]
    wrong = DIAMONDS.replace("FLIP", "rows[0][1] = rows[1][0] = 1 - rows[0][1]")
    v = _grade(problems, tmp_path, "csplib_050_diamond_free", wrong, (1,), cache=cache)[0]
    assert v.verdict == "incorrect", v.reasons


def test_data_that_cannot_be_put_in_is_an_error_saying_why(problems, tmp_path, cache):
    joint = BUDGET.replace("budget = 14000", "budget, other = 14000, 1").replace("EXTRA", "").replace("FLIP", "chosen")
    v = _grade(problems, tmp_path, "capital_budget", joint, cache=cache)[0]
    assert v.verdict == "error" and "assigns budget, other together" in v.reasons[0], v.reasons
    broken = BUDGET.replace("budget = 14000", "budget = = 14000").replace("EXTRA", "").replace("FLIP", "chosen")
    v = _grade(problems, tmp_path, "capital_budget", broken, cache=cache)[0]
    assert v.verdict == "error" and "syntax error at line 6" in v.reasons[0], v.reasons


def test_a_file_python_cannot_read_or_a_folder_is_refused_in_words(problems, tmp_path, cache):
    v = _grade(problems, tmp_path, "abbots_puzzle", "print(1)\x00\n", cache=cache)[0]
    assert v.verdict == "error" and v.reasons[0].startswith("syntax error of the submission: "), v.reasons
    assert "None" not in v.reasons[0]
    with pytest.raises(UserError, match="is a folder"):
        grade_program(problems["abbots_puzzle"], tmp_path, [0])


def test_run_errors_keep_the_submissions_line_and_name_missing_cpmpy_apis(problems, tmp_path, cache):
    base = APPOINTMENTS.replace("EXTRA", "")
    lines = base.splitlines()
    boom = "\n".join([*lines[:-1], "raise ValueError('boom')", lines[-1]]) + "\n"
    v = _grade(problems, tmp_path, "appointment_scheduling", boom, cache=cache)[0]
    # The data block shrinks from 9 lines to 3 when the instance is put in; the line is still the submission's.
    assert v.verdict == "error" and f"at line {len(lines)} of the submission" in v.reasons[0], v.reasons
    assert "ValueError: boom" in v.reasons[0]
    old_api = base.replace('x = cp.boolvar(shape=(n_people, n_slots), name="x")', "x = cp.BoolVar((n_people, n_slots))")
    v = _grade(problems, tmp_path, "appointment_scheduling", old_api, cache=cache)[0]
    # Older CPMpy releases had BoolVar (issue 41): read as boolvar, with a note.
    assert v.correct and any("cpmpy.BoolVar read as cpmpy.boolvar" in n for n in v.notes), (v.reasons, v.notes)
    never = base.replace('x = cp.boolvar(shape=(n_people, n_slots), name="x")', "x = cp.BoolVars((n_people, n_slots))")
    v = _grade(problems, tmp_path, "appointment_scheduling", never, cache=cache)[0]
    assert v.verdict == "error" and "cpmpy.BoolVars, an API the installed CPMpy" in v.reasons[0], v.reasons
    bad = base.replace("for j in range(n_slots):\n", "for j in range(n_slots)\n")
    v = _grade(problems, tmp_path, "appointment_scheduling", bad, cache=cache)[0]
    line = bad.splitlines().index("for j in range(n_slots)") + 1
    assert v.verdict == "error" and f"syntax error at line {line} of the submission" in v.reasons[0], v.reasons


def test_grade_cli_strict_types_refuses_0_1_that_the_default_reads_as_booleans(cpbench_dir, tmp_path):
    from typer.testing import CliRunner

    from triforge.cli.cpagent import app

    sub = tmp_path / "appointments.py"
    sub.write_text(APPOINTMENTS.replace("EXTRA", ""))
    args = ["grade", "--data", str(cpbench_dir), "--problem", "appointment_scheduling", "--submission", str(sub)]
    lenient = CliRunner().invoke(app, args)
    assert lenient.exit_code == 0, lenient.output
    assert "0/1 read as booleans for x" in lenient.output
    strict = CliRunner().invoke(app, [*args, "--strict-types"])
    assert strict.exit_code == 1 and "expected boolean" in strict.output, strict.output
