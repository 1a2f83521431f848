"""The CP-Bench loader: the real data set and hand-made folders in and out of the layout."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from triforge.core.errors import UserError
from triforge.cpagent.dataset import DatasetError, load_dataset, load_problem, substitute_data
from triforge.data import get

MODEL = '''#!/usr/bin/python3
# Category: toy
# Source: nowhere
{timeout}
"""
Pick x.

Print x (x).
"""

# Data
lo = 3  # lower bound
# End of data

from cpmpy import *
import json
x = intvar(lo, 9, name="x")
model = Model({objective})
model.solve()
solution = {{"x": x.value()}}
print(json.dumps(solution))
'''


def make(root: Path, pid: str = "toy", instances: list | None = None, timeout: str = "", objective: str = "") -> Path:
    d = root / "dataset" / pid
    d.mkdir(parents=True)
    (d / f"{pid}.cpmpy.py").write_text(MODEL.format(timeout=timeout, objective=objective))
    (d / f"{pid}.json").write_text(json.dumps(instances if instances is not None else [{"lo": 3}, {"lo": 5}]))
    return root


def test_reads_all_fields(tmp_path):
    make(tmp_path, timeout="# Timeout: 7", objective="minimize=x")
    (p,) = load_dataset(tmp_path)
    assert (p.id, p.category, p.source, p.timeout_s, p.time_limit_s) == ("toy", "toy", "nowhere", 7.0, 7.0)
    assert p.description == "Pick x.\n\nPrint x (x)."
    assert p.default_data.strip() == "lo = 3  # lower bound"
    assert p.instances == ({"lo": 3}, {"lo": 5})
    assert p.output_keys == ("x",)
    assert (p.is_optimization, p.objective_sense) == (True, "minimize")


def test_defaults_without_timeout_or_objective(tmp_path):
    make(tmp_path)
    (p,) = load_dataset(tmp_path / "dataset")  # the dataset/ folder itself works too
    assert p.timeout_s is None and p.time_limit_s == 60.0
    assert not p.is_optimization and p.objective_sense is None


def test_instance_substitution_replaces_only_the_data_block(tmp_path):
    make(tmp_path)
    (p,) = load_dataset(tmp_path)
    src = p.instance_source(1)
    assert "lo = 5\n" in src and "lo = 3" not in src
    assert src.count("# Data") == 1 and "x = intvar(lo, 9" in src
    with pytest.raises(UserError, match="out of range"):
        p.instance_source(2)


def test_substitute_data_renders_python_literals():
    out = substitute_data("a\n# Data\nx = 1\n# End of data\nb\n", {"x": [True, None], "y": "s"})
    assert out == "a\n# Data\nx = [True, None]\ny = 's'\n# End of data\nb\n"


@pytest.mark.parametrize("missing", [".cpmpy.py", ".json"])
def test_missing_file_is_named(tmp_path, missing):
    make(tmp_path)
    gone = tmp_path / "dataset" / "toy" / f"toy{missing}"
    gone.unlink()
    with pytest.raises(DatasetError, match=str(gone).replace(".", r"\.")):
        load_dataset(tmp_path)


def test_bad_instances_file_is_named(tmp_path):
    make(tmp_path)
    bad = tmp_path / "dataset" / "toy" / "toy.json"
    bad.write_text("{not json")
    with pytest.raises(DatasetError, match="toy.json: not valid JSON"):
        load_dataset(tmp_path)


def test_a_folder_outside_the_layout_is_refused(tmp_path):
    (tmp_path / "stuff").mkdir()
    with pytest.raises(DatasetError, match="neither holds dataset"):
        load_dataset(tmp_path)
    with pytest.raises(DatasetError, match="no such folder"):
        load_dataset(tmp_path / "nope")


def test_unknown_id_names_the_closest(tmp_path):
    make(tmp_path, pid="n_queens")
    with pytest.raises(UserError, match="closest: n_queens"):
        load_problem(tmp_path, "nqueens")


# ---- the real data set ----


def test_real_dataset_has_101_problems_with_consistent_fields(problems, cpbench_dir):
    assert len(problems) == 101
    original = json.loads((get("dcp-bench-open").root / "original_ids.json").read_text())
    assert set(problems) == set(original)
    # original_ids.json marks four problems as satisfaction problems, but their texts ask for an optimum
    # and their references have an objective: the loader follows the model (and the text).
    differ = {pid for pid, p in problems.items() if p.is_optimization != original[pid]["is_optimization"]}
    assert differ == {"cmo_2012", "coin3_application", "covering_opl", "knapsack"}
    for pid in differ:
        assert re.search(r"smallest|minimum|minimiz|maximiz", problems[pid].description), pid
    assert sum(p.is_optimization for p in problems.values()) == 28
    for pid, p in problems.items():
        assert p.category in {"aplai_course", "cpmpy_examples", "csplib", "hakan_examples"}, pid
        assert p.description and p.output_keys, pid
        assert all(set(inst) for inst in p.instances), pid
    assert sum(p.n_instances for p in problems.values()) == 269
    assert [pid for pid, p in problems.items() if p.timeout_s is not None] == ["cmo_2012"]
    assert problems["cmo_2012"].time_limit_s == 120.0
    assert problems["csplib_049_number_partitioning"].output_keys == ("A", "B")


def test_every_instance_substitutes_all_its_names(problems):
    for p in problems.values():
        for k, inst in enumerate(p.instances):
            src = p.instance_source(k)
            for name in inst:
                assert f"\n{name} = " in src, (p.id, k, name)


# ---- putting an instance into a program's data block(s) ----

PROGRAM = """import json
# Data
m = [[1, 0],
     [0, 1]]  # who is free when
n_people = len(m)
a = 1; b = 2
# End of data
print(n_people)
# Data
k = 3
# End of data
"""


def test_instance_assignments_replace_only_the_names_they_define():
    out = substitute_data(PROGRAM, {"m": [[1, 1, 1]], "b": 5, "k": 4, "extra": "x"})
    assert out == ("import json\n# Data\nextra = 'x'\nm = [[1, 1, 1]]\nn_people = len(m)\na = 1\nb = 5\n"
                   "# End of data\nprint(n_people)\n# Data\nk = 4\n# End of data\n")


def test_a_block_of_instance_names_only_is_rewritten_as_before():
    src = "# Data\nn = 3  # size\nw = [1, 2]\n# End of data\nprint(n)\n"
    assert substitute_data(src, {"w": [5], "n": 9}) == "# Data\nw = [5]\nn = 9\n# End of data\nprint(n)\n"


@pytest.mark.parametrize(("body", "why"), [
    ("a, b = 1, 2", "assigns a, b together, the instance gives only a"),
    ("a = = 1", "its data block is not valid Python"),
])
def test_data_that_cannot_be_put_in_says_why(body, why):
    with pytest.raises(DatasetError, match=why):
        substitute_data(f"# Data\n{body}\n# End of data\n", {"a": 3})


@pytest.mark.parametrize(("code", "keys"), [
    ('solution = {"a": a.value(), "b": 1}\nprint(json.dumps(solution))', ("a", "b")),
    ('sol = {}\nsol["x"] = 1\nsol["y"] = [2]\nsol.update(z=3)\nprint(json.dumps(sol))', ("x", "y", "z")),
    ("print(json.dumps(dict(p=1, q=2)))", ("p", "q")),
    ('def make():\n    return {"u": 1}\n\nprint(json.dumps(make()))', ("u",)),
    ("res = {}\nres[name] = 1\nprint(json.dumps(res))", ()),
])
def test_output_keys_of_a_dict_built_in_several_ways(code, keys):
    import ast

    from triforge.cpagent.dataset import _solution_keys

    assert _solution_keys(ast.parse(code)) == keys
