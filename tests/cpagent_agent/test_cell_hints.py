"""Install commands taken out of a cell, and hints for names CPMpy does not have."""

from __future__ import annotations

import pytest

from triforge.cpagent.cell_hints import error_hint, install_note, missing_name_hint, strip_installs


@pytest.mark.parametrize("line", [
    "!pip install cpmpy", "%pip install -q cpmpy ortools", "! pip3 install --upgrade cpmpy==1.3.0",
    "!python -m pip install cpmpy", "!conda install -y numpy", "!sudo apt-get install -y minizinc",
    "!uv pip install cpmpy", "pip install cpmpy",
])
def test_install_commands_are_taken_out(line):
    code, removed = strip_installs(f"x = 1\n{line}\nprint(x)")
    assert removed == [line.strip()] and code == "x = 1\npass\nprint(x)"


def test_an_indented_install_keeps_the_block_valid():
    code, removed = strip_installs("if True:\n    !pip install cpmpy\nprint(2)")
    assert code == "if True:\n    pass\nprint(2)" and removed == ["!pip install cpmpy"]


@pytest.mark.parametrize("code", [
    "print('pip install cpmpy')", "# run: pip install cpmpy", "!pip list", "!pip show cpmpy",
    "install = 3", "x = 'conda install'",
])
def test_other_cells_are_left_alone(code):
    assert strip_installs(code) == (code, [])


def test_the_note_names_the_installed_versions():
    note = install_note(["!pip install cpmpy"])
    assert "`!pip install cpmpy`" in note and "cpmpy " in note and "ortools " in note


@pytest.mark.parametrize(("name", "expect"), [
    ("Eq", "write `cp.Eq(a, b)` as `a == b`"), ("NotEqual", "`a != b`"), ("Ge", "`a >= b`"), ("AllDiff", "`cp.AllDifferent`"), ("IntVar", "write `cp.intvar`: names are case-sensitive"),
    ("Minimize", "`model.minimize(expr)`"), ("Implies", "`(a).implies(b)`"), ("Qwerty", "`cp.AllDifferent`"),
    ("Sum", "`cp.sum`"), ("Variable", "`cp.intvar(lb, ub"), ("Add", "`model += ...`"), ("prod", "`x * y`"),
])
def test_a_missing_cpmpy_name_gets_a_hint(name, expect):
    hint = missing_name_hint(f"module 'cpmpy' has no attribute '{name}'")
    assert f"CPMpy has no `cp.{name}`" in hint and expect in hint


@pytest.mark.parametrize("value", [
    "module 'numpy' has no attribute 'Eq'", "'NDVarArray' object has no attribute 'values'", "",
])
def test_other_attribute_errors_get_no_hint(value):
    assert missing_name_hint(value) == ""


def test_a_meaning_hint_drops_close_names_of_other_meanings():
    """`cp.Equal` is not `cp.AllEqual`, and `cp.Variable` is not `cp.Table`: difflib's nearest names mislead."""
    assert "AllEqual" not in missing_name_hint("module 'cpmpy' has no attribute 'Equal'")
    assert "Table" not in missing_name_hint("module 'cpmpy' has no attribute 'Variable'")


def test_an_if_on_an_expression_gets_the_constraint_forms():
    value = "__bool__ should not be called on a CPMPy expression x[0] != 0 as it will always return True"
    hint = error_hint("ValueError", value)
    assert "`cp.IfThenElse(cond, a, b)`" in hint and ".implies(" in hint
    assert error_hint("ValueError", "negative dimensions are not allowed") == ""
    assert error_hint("NameError", "name 'model' is not defined") == ""


def test_value_of_a_method_points_at_objective_value():
    """Seen on `candies`: `int(model.objective.value())`."""
    hint = error_hint("AttributeError", "'function' object has no attribute 'value'")
    assert "`model.objective_value()`" in hint
    assert error_hint("AttributeError", "'int' object has no attribute 'get_bounds'") == ""


def test_a_name_that_differs_only_in_case_gets_just_that_name():
    """Seen on the main job: told "close: `cp.intvar`, `cp.Inverse`", the model kept `cp.IntVar`."""
    hint = missing_name_hint("module 'cpmpy' has no attribute 'IntVar'")
    assert "`cp.intvar`" in hint and "Inverse" not in hint
