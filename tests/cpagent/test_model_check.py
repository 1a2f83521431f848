"""The model-level check (issue 41): planted under-constrained models that print a right solution are caught,
honest alternative models pass, a model that rules out valid solutions is reported, and what was covered is said.

Planted programs print a right solution on purpose: they solve a right model first, then solve their own
(under-constrained) model with that solution as a fixed hint, so the solver "happens" to land on a right
answer; their model is then checked, not their luck. Problems: bundled CP-Bench ones, the team's corpus
(tests/cpagent/corpus), and one small problem written here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from triforge.cpagent.dataset import load_dataset
from triforge.cpagent.grader import grade_program
from triforge.cpagent.refs import RefCache, reference_for

CORPUS = Path(__file__).with_name("corpus")

QUEENS = '''import json
import numpy as np
import cpmpy as cp

# Data
n = 10
# End of data
queens = cp.intvar(1, n, shape=n, name="queens")
full = cp.Model(cp.AllDifferent(queens), cp.AllDifferent(queens - np.arange(n)), cp.AllDifferent(queens + np.arange(n)))
full.solve()
right = [int(v) for v in queens.value()]
model = cp.Model(MODEL)
s = cp.SolverLookup.get("ortools", model)
s.solution_hint(list(queens), right)
s.solve(num_workers=1, fix_variables_to_their_hinted_value=True)
print(json.dumps({"queens": [int(v) for v in queens.value()]}))
'''
DIAGONALS = "cp.AllDifferent(queens - np.arange(n)), cp.AllDifferent(queens + np.arange(n))"

SCHUR = '''import json
import cpmpy as cp

# Data
n = 13
c = 3
# End of data
def model_for(top):
    balls = cp.intvar(1, top, shape=n, name="balls")
    m = cp.Model()
    for x in range(1, n):
        for y in range(1, n - x + 1):
            if x + y <= n:
                m += ~((balls[x - 1] == balls[y - 1]) & (balls[y - 1] == balls[x + y - 1]))
    return m, balls
full, balls = model_for(c)
full.solve()
right = [int(v) for v in balls.value()]
model, balls = model_for(TOP)
s = cp.SolverLookup.get("ortools", model)
s.solution_hint(list(balls), right)
s.solve(num_workers=1, fix_variables_to_their_hinted_value=True)
print(json.dumps({"balls": [int(v) for v in balls.value()]}))
'''

CORPUS_QUEENS = '''import json
import cpmpy as cp

# Data
n = 6
# End of data
q = cp.intvar(0, n - 1, shape=n, name="q")
base = [cp.AllDifferent(q), cp.AllDifferent([q[i] + i for i in range(n)]), cp.AllDifferent([q[i] - i for i in range(n)])]
full = cp.Model(base, q[0] < q[1])
full.solve()
right = [int(v) for v in q.value()]
s = cp.SolverLookup.get("ortools", cp.Model(base))
s.solution_hint(list(q), right)
s.solve(num_workers=1, fix_variables_to_their_hinted_value=True)
print(json.dumps({"queens": [int(v) for v in q.value()]}))
'''

# A problem written for these tests: its optimum (x=0, y=3) is unique; without the y term, y is free.
PAIR_PROBLEM = '''# Category: triforge-test
# Source: written for the model-check tests (2026-12-07)
"""
Choose integers x and y in 0..5 with x + y >= 3, minimising 2x + y. Print x and y.
"""

import json

import cpmpy as cp

x = cp.intvar(0, 5, name="x")
y = cp.intvar(0, 5, name="y")
model = cp.Model(x + y >= 3)
model.minimize(2 * x + y)
model.solve()
solution = {"x": x.value(), "y": y.value()}
print(json.dumps(solution))
'''
PAIR = '''import json
import cpmpy as cp

x = cp.intvar(0, 5, name="x")
y = cp.intvar(0, 5, name="y")
s = cp.SolverLookup.get("ortools", cp.Model(x + y >= 3))
s.minimize(OBJECTIVE)
s.solution_hint([x, y], [0, 3])
s.solve(num_workers=1, fix_variables_to_their_hinted_value=True)
print(json.dumps({"x": int(x.value()), "y": int(y.value())}))
'''


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> RefCache:
    return RefCache(tmp_path_factory.mktemp("model-check-refs"))


@pytest.fixture(scope="module")
def corpus():
    return {p.id: p for p in load_dataset(CORPUS, ["c05_queens_helper"])}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair-set") / "dataset" / "pair_min"
    root.mkdir(parents=True)
    (root / "pair_min.cpmpy.py").write_text(PAIR_PROBLEM)
    (root / "pair_min.json").write_text("[]")
    [p] = load_dataset(root.parent.parent)
    return p


def _grade(problem, tmp_path: Path, text: str, mode: str, cache: RefCache, instance: int = 0):
    path = tmp_path / f"{problem.id}_{mode}.py"
    path.write_text(text)
    return grade_program(problem, path, [instance], cache=cache, model_check=mode)[0]


def _planted(problems, corpus, pair):
    return {
        "queens: column all-different dropped": (problems["csplib_054_n_queens"], QUEENS.replace("MODEL", DIAGONALS)),
        "schur: box bound dropped (1..n)": (problems["csplib_015_schurs_lemma"], SCHUR.replace("TOP", "n")),
        "corpus queens: ordering constraint dropped": (corpus["c05_queens_helper"], CORPUS_QUEENS),
        "pair: objective term y missing": (pair, PAIR.replace("OBJECTIVE", "2 * x")),
    }


@pytest.mark.parametrize("name", ["queens: column all-different dropped", "schur: box bound dropped (1..n)",
                                  "corpus queens: ordering constraint dropped", "pair: objective term y missing"])
def test_planted_under_constrained_models_printing_a_right_solution_are_caught(
        name, problems, corpus, pair, cache, tmp_path):
    problem, text = _planted(problems, corpus, pair)[name]
    printed_only = _grade(problem, tmp_path, text, "off", cache)
    assert printed_only.correct, (name, printed_only.reasons)  # the planted program does print a right answer
    assert printed_only.model_check is None
    v = _grade(problem, tmp_path, text, "sample", cache)
    assert v.verdict == "incorrect", (name, v.reasons, v.model_check)
    mc = v.model_check
    assert mc["soundness"] == "unsound" and mc["counterexample"] != printed_only.solution
    assert any("model also admits" in r and "which the reference rejects" in r for r in v.reasons), v.reasons
    if problem.is_optimization:
        assert "not optimal" in mc["counter_reason"] and "optimal solutions" in mc["coverage"]


def test_honest_alternative_models_pass(problems, pair, cache, tmp_path):
    queens = problems["csplib_054_n_queens"]
    alternatives = {
        # other variables: a boolean board, positions printed from it
        "board": (queens, '''import json
import cpmpy as cp
n = 10
b = cp.boolvar(shape=(n, n), name="b")
m = cp.Model([cp.sum(b[i, :]) == 1 for i in range(n)], [cp.sum(b[:, j]) == 1 for j in range(n)])
for d in range(-n + 1, n):
    m += cp.sum([b[i, i - d] for i in range(n) if 0 <= i - d < n]) <= 1
    m += cp.sum([b[i, d + n - 1 - i] for i in range(n) if 0 <= d + n - 1 - i < n]) <= 1
m.solve()
print(json.dumps({"queens": [int(row.argmax()) + 1 for row in b.value()]}))
'''),
        # redundant constraints, another solver
        "redundant, exact": (queens, '''import json
import numpy as np
import cpmpy as cp
n = 10
q = cp.intvar(1, n, shape=n, name="q")
m = cp.Model(cp.AllDifferent(q), cp.AllDifferent(q - np.arange(n)), cp.AllDifferent(q + np.arange(n)),
             cp.sum(q) == n * (n + 1) // 2, [q[i] != q[i + 1] for i in range(n - 1)])
m.solve("exact")
print(json.dumps({"queens": q.value().tolist()}))
'''),
        # a solver object given constraints one by one
        "solver object": (problems["csplib_015_schurs_lemma"], '''import json
import cpmpy as cp
n, c = 13, 3
balls = cp.intvar(1, c, shape=n, name="balls")
s = cp.SolverLookup.get("ortools")
for x in range(1, n):
    for y in range(x, n - x + 1):
        s += cp.any([balls[x - 1] != balls[y - 1], balls[y - 1] != balls[x + y - 1]])
s.solve()
print(json.dumps({"balls": balls.value().tolist()}))
'''),
        "pair: whole objective": (pair, PAIR.replace("OBJECTIVE", "2 * x + y")),
    }
    for name, (problem, text) in alternatives.items():
        v = _grade(problem, tmp_path, text, "sample", cache)
        assert v.correct, (name, v.reasons, v.model_check)
        assert v.model_check["soundness"] == "sound", (name, v.model_check)
        # The board's output (argmax of a row) cannot be read by probing: completeness is then not checked.
        want = ("keeps_reference", "not_checked") if name == "board" else ("keeps_reference",)
        assert v.model_check["completeness"] in want, (name, v.model_check)
    # The pair's one optimal solution is all there is, and the check says so.
    assert _grade(pair, tmp_path, PAIR.replace("OBJECTIVE", "2 * x + y"), "sample", cache
                  ).model_check["coverage"] == "the one optimal solution checked"


def test_symmetry_breaking_that_removes_the_references_solution_is_reported_not_failed(problems, cache, tmp_path):
    queens = problems["csplib_054_n_queens"]
    ref = reference_for(queens, 0, cache).solution["queens"]
    # Mirror symmetry broken the other way from the reference's own solution: valid, but it rules that one out.
    order = ">" if ref[0] < ref[-1] else "<"
    text = f'''import json
import numpy as np
import cpmpy as cp
n = 10
q = cp.intvar(1, n, shape=n, name="q")
m = cp.Model(cp.AllDifferent(q), cp.AllDifferent(q - np.arange(n)), cp.AllDifferent(q + np.arange(n)),
             q[0] {order} q[n - 1])
m.solve()
print(json.dumps({{"queens": q.value().tolist()}}))
'''
    v = _grade(queens, tmp_path, text, "sample", cache)
    assert v.correct, v.reasons
    assert v.model_check["soundness"] == "sound"
    assert v.model_check["completeness"] == "over-constrained", v.model_check
    assert any(n.startswith("over-constrained: the submitted model rules out the reference's solution")
               for n in v.notes), v.notes


def test_a_model_that_cannot_be_captured_is_said_so_and_the_printed_verdict_stands(problems, pair, cache, tmp_path):
    # Constraints posted on the solver's own model are invisible to the capture.
    native = '''import json
import cpmpy as cp
x = cp.intvar(0, 5, name="x")
y = cp.intvar(0, 5, name="y")
s = cp.SolverLookup.get("ortools", cp.Model(x + y >= 3))
s.minimize(2 * x + y)
s.ort_model.Add(s.solver_var(y) <= 4)
s.solve()
print(json.dumps({"x": int(x.value()), "y": int(y.value())}))
'''
    v = _grade(pair, tmp_path, native, "sample", cache)
    assert v.correct and v.model_check["soundness"] == "not_checked"
    assert "not checked: the program's model could not be captured" in v.model_check["coverage"]
    assert any("the verdict rests on the printed solution only" in n for n in v.notes)
    # An improvement loop: its last solve() has no solution, so there is no model to enumerate.
    loop = '''import json
import cpmpy as cp
x = cp.intvar(0, 5, name="x")
y = cp.intvar(0, 5, name="y")
s = cp.SolverLookup.get("ortools", cp.Model(x + y >= 3))
best = None
while s.solve():
    best = (int(x.value()), int(y.value()))
    s += 2 * x + y < 2 * best[0] + best[1]
print(json.dumps({"x": best[0], "y": best[1]}))
'''
    v = _grade(pair, tmp_path, loop, "sample", cache)
    assert v.correct and v.model_check["soundness"] == "not_checked", v.model_check
    assert "last solve() gave no" in v.model_check["coverage"]


def test_coverage_says_how_much_was_checked(problems, cache, tmp_path):
    queens = problems["csplib_054_n_queens"]
    v = _grade(queens, tmp_path, queens.reference_source, "sample", cache)
    assert v.correct and v.model_check["soundness"] == "sound"
    assert v.model_check["coverage"] == "first 10 of at least 11 solutions checked"
    age = problems["age_changing"]
    v = _grade(age, tmp_path, age.reference_source, "sample", cache)
    assert v.correct and v.model_check["exhaustive"], v.model_check
    assert v.model_check["coverage"].startswith("all ") and v.model_check["coverage"].endswith(" solutions checked")


def test_bench_report_has_a_model_column_and_counts_printed_right_but_model_wrong(pair, tmp_path):
    from triforge.cpagent.bench_report import render_reports, summarize
    from triforge.cpagent.solve import grade_code
    from triforge.cpagent.task import task_from_problem

    task = task_from_problem(pair)
    runs = {"pair_min#seed0": {"grade": grade_code(task, PAIR.replace("OBJECTIVE", "2 * x"))},
            "pair_min#seed1": {"grade": grade_code(task, PAIR.replace("OBJECTIVE", "2 * x + y"))},
            "pair_min#seed2": {"grade": grade_code(task, PAIR.replace("OBJECTIVE", "2 * x + y"), model_check="off")}}
    summary = summarize(runs, ["pair_min"], 3)
    assert summary["per_problem"]["pair_min"]["model"] == ["unsound", "sound", "-"]
    assert summary["printed_right_model_wrong"] == 1 and summary["grades"] == {"incorrect": 1, "correct": 2}
    render_reports(tmp_path, summary, runs, "scripted")
    md = (tmp_path / "report.md").read_text()
    assert "| model |" in md and "| unsound / sound / - |" in md and "printed right but model wrong: **1**" in md
    assert "<th>model</th>" in (tmp_path / "report.html").read_text()


def test_full_mode_forces_many_reference_solutions_into_the_model(problems, cache, tmp_path):
    queens = problems["csplib_054_n_queens"]
    # Mirror symmetry broken one fixed way: about half the reference's solutions are ruled out, whichever it printed.
    text = '''import json
import numpy as np
import cpmpy as cp
n = 10
q = cp.intvar(1, n, shape=n, name="q")
m = cp.Model(cp.AllDifferent(q), cp.AllDifferent(q - np.arange(n)), cp.AllDifferent(q + np.arange(n)), q[0] < q[n - 1])
m.solve()
print(json.dumps({"queens": q.value().tolist()}))
'''
    v = _grade(queens, tmp_path, text, "full", cache)
    mc = v.model_check
    assert v.correct and mc["soundness"] == "sound" and mc["solutions_checked"] > 10, mc
    assert mc["completeness"] == "over-constrained", mc
    assert " reference solutions" in mc["completeness_note"] and "rules out" in mc["completeness_note"], mc
