"""Programs as LLMs write them (issue 41, part 0): the instance's data found without well-formed markers, and
CPMpy names of older releases read as today's API.

One problem (Schur's lemma: balls 1..n into c boxes, no x + y = z in one box; instance 0 has n = 13, instance 1
n = 10), one model, its data spelled in the ways programs spell it. Each spelling is graded on both instances:
right when the model is right (instance 1 only when the data was put in: 13 printed balls are the wrong length),
`incorrect` when the model is wrong (three balls forced into one box). The model check is off: this is about
reading the program.
"""

from __future__ import annotations

import pytest

from triforge.cpagent.data_block import find_sites, put_instance
from triforge.cpagent.grader import grade_program
from triforge.cpagent.refs import RefCache

MODEL = '''balls = cp.intvar(1, c, shape=n, name="balls")
model = cp.Model()
for x in range(1, n):
    for y in range(1, n - x + 1):
        if x + y <= n:
            model += ~((balls[x - 1] == balls[y - 1]) & (balls[y - 1] == balls[x + y - 1]))
WRONG
model.solve()
print(json.dumps({"balls": balls.value().tolist()}))
'''
WRONG = "model += [balls[0] == balls[1], balls[1] == balls[2]]"
HEAD = "import json\nimport cpmpy as cp\n\n"


def _indent(text: str) -> str:
    return "".join("    " + line if line.strip() else line for line in text.splitlines(keepends=True))


SPELLINGS = {
    "no markers": HEAD + "n = 13\nc = 3\n" + MODEL,
    "one marker, no end": HEAD + "# Data\nn = 13  # balls\nc = 3  # boxes\n" + MODEL,
    "markers with other text": HEAD + "# Data:\nn = 13\nc = 3\n# End of data section\n" + MODEL,
    "decorated markers": HEAD + "# ---- data ----\nn = 13\nc = 3\n# ---- end data ----\n" + MODEL,
    "end marker only": HEAD + "n = 13\nc = 3\n# End of data\n" + MODEL,
    "tuple and annotation": HEAD + "n: int = 13\nc, unused = 3, 'x'\n" + MODEL,
    "data in a function": HEAD + "def main():\n    n = 13\n    c = 3\n" + _indent(MODEL) + "\n\nmain()\n",
    "data under the main guard": HEAD + 'if __name__ == "__main__":\n    n = 13\n    c = 3\n' + _indent(MODEL),
    "data read from a dict": HEAD + 'data = {"n": 13, "c": 3}\nn = data["n"]\nc = data["c"]\n' + MODEL,
    "dict unpacked in one line": HEAD + 'DATA = {"n": 13, "c": 3}\nn, c = DATA["n"], DATA["c"]\n' + MODEL,
    "dict passed to a function": HEAD + 'def solve(d):\n    n, c = d["n"], d["c"]\n' + _indent(MODEL)
    + '\n\nsolve({"n": 13, "c": 3})\n',
    "data as parameter defaults": HEAD + "def main(n=13, c=3):\n" + _indent(MODEL) + "\n\nmain()\n",
    "keyword-only defaults": HEAD + "def main(*, n=13, c=3):\n" + _indent(MODEL) + "\n\nmain()\n",
    "data in a class": HEAD + "class Data:\n    n = 13\n    c = 3\n\n\nn, c = Data.n, Data.c\n" + MODEL,
    "data returned by a function": HEAD + 'def get_data():\n    return {"n": 13, "c": 3}\n\n\nd = get_data()\n'
    + 'n, c = d["n"], d["c"]\n' + MODEL,
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> RefCache:
    return RefCache(tmp_path_factory.mktemp("data-refs"))


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_each_spelling_is_graded_on_every_instance(spelling, problems, cache, tmp_path):
    schur = problems["csplib_015_schurs_lemma"]
    right = tmp_path / "right.py"
    right.write_text(SPELLINGS[spelling].replace("WRONG", ""))
    v0, v1 = grade_program(schur, right, [0, 1], cache=cache, model_check="off")
    assert v0.correct and v1.correct, (spelling, v0.reasons, v1.reasons)
    assert len(v1.solution["balls"]) == 10  # instance 1's n was put in
    assert any("the instance's values were put into its own assignments" in n for n in v1.notes), v1.notes
    assert not any("put into" in n for n in v0.notes), v0.notes  # instance 0 equals the program's own values
    wrong = tmp_path / "wrong.py"
    wrong.write_text(SPELLINGS[spelling].replace("WRONG", WRONG))
    for v in grade_program(schur, wrong, [0, 1], cache=cache, model_check="off"):
        assert v.verdict == "incorrect", (spelling, v.instance, v.reasons)


def test_instance_zero_runs_unchanged_where_the_values_are_the_programs_own():
    for spelling, text in SPELLINGS.items():
        src, changed, missing = put_instance(text, {"n": 13, "c": 3})
        assert src == text and not changed and not missing, spelling
        src, changed, missing = put_instance(text, {"n": 10, "c": 3})
        assert [s.name for s in changed] == ["n"] and not missing, spelling
        assert src != text and "10" in src, spelling


def test_data_the_grader_cannot_place_is_an_error_for_other_instances_only(problems, cache, tmp_path):
    schur = problems["csplib_015_schurs_lemma"]
    hidden = tmp_path / "json_string.py"  # the data is inside a string: no assignment of n or c to find
    hidden.write_text(HEAD + "d = json.loads('{\"n\": 13, \"c\": 3}')\nn = d.get('n')\nc = d.get('c')\n"
                      + MODEL.replace("WRONG", ""))
    sites, missing = find_sites(hidden.read_text(), ["n", "c"])
    assert set(sites) == {"n", "c"} and not missing  # `n = d.get('n')` is where n gets its value
    v0, v1 = grade_program(schur, hidden, [0, 1], cache=cache, model_check="off")
    assert v0.correct, v0.reasons
    assert v1.correct and len(v1.solution["balls"]) == 10, v1.reasons
    other = tmp_path / "other_names.py"  # the program calls them N and boxes: nothing to put the instance into
    other.write_text(HEAD + "N = 13\nboxes = 3\n" + MODEL.replace("WRONG", "").replace("c, shape=n", "boxes, shape=N")
                     .replace("range(1, n)", "range(1, N)").replace("n - x + 1", "N - x + 1")
                     .replace("x + y <= n", "x + y <= N"))
    v0, v1 = grade_program(schur, other, [0, 1], cache=cache, model_check="off")
    assert v0.correct and any("assigns no n, c; it ran on its own data" in n for n in v0.notes), v0.notes
    assert v1.verdict == "error" and "nowhere to put the instance's data" in v1.reasons[0], v1.reasons


LEGACY = {
    "cp.IntVar": HEAD + "n, c = 13, 3\n" + MODEL.replace("cp.intvar(", "cp.IntVar("),
    "from cpmpy import IntVar, BoolVar": "import json\nfrom cpmpy import IntVar, BoolVar, Model\nimport cpmpy as cp\n"
    "n, c = 13, 3\nflag = BoolVar(name='flag')\n" + MODEL.replace("cp.intvar(", "IntVar(")
    .replace("model = cp.Model()", "model = Model(flag | ~flag)"),
    "star import": "import json\nfrom cpmpy import *\nimport cpmpy as cp\nn, c = 13, 3\n"
    + MODEL.replace("cp.intvar(", "IntVar("),
    "old lowercase global": HEAD + "n, c = 13, 3\n" + MODEL.replace(
        "model = cp.Model()", "model = cp.Model(cp.alldifferent([balls[0], balls[1]]))"),
}


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_names_of_older_cpmpy_releases_are_read_as_todays_api(name, problems, cache, tmp_path):
    schur = problems["csplib_015_schurs_lemma"]
    right = tmp_path / "legacy.py"
    right.write_text(LEGACY[name].replace("WRONG", ""))
    (v,) = grade_program(schur, right, [0], cache=cache, model_check="off")
    assert v.correct, (name, v.reasons)
    assert any("an alias older CPMpy releases had" in n for n in v.notes), v.notes
    wrong = tmp_path / "legacy_wrong.py"
    wrong.write_text(LEGACY[name].replace("WRONG", WRONG))
    (v,) = grade_program(schur, wrong, [0], cache=cache, model_check="off")
    assert v.verdict == "incorrect", (name, v.reasons)


def test_a_name_cpmpy_never_had_is_still_an_error_saying_so(problems, cache, tmp_path):
    schur = problems["csplib_015_schurs_lemma"]
    bad = tmp_path / "bad.py"
    bad.write_text(HEAD + "n, c = 13, 3\n" + MODEL.replace("WRONG", "").replace("cp.intvar(", "cp.IntegerVariable("))
    (v,) = grade_program(schur, bad, [0], cache=cache, model_check="off")
    assert v.verdict == "error" and "cpmpy.IntegerVariable" in v.reasons[0] and "does not have" in v.reasons[0]
