"""The prompt's list of CPMpy globals comes from the installed cpmpy: every name and argument in it is real."""

from __future__ import annotations

import inspect
import re

import cpmpy as cp

from triforge.cpagent.cpmpy_api import globals_reference
from triforge.cpagent.task import CPTask, system_prompt

LINE = re.compile(r"^- `cp\.(\w+)\((.*?)\)`")


def test_every_listed_global_and_argument_exists_in_installed_cpmpy():
    lines = [m for ln in globals_reference().splitlines() if (m := LINE.match(ln))]
    assert len(lines) >= 15
    for m in lines:
        cls = getattr(cp, m.group(1))
        params = inspect.signature(cls.__init__).parameters
        for arg in filter(None, (a.split("=")[0].strip() for a in m.group(2).split(","))):
            assert arg == "xs" or arg in params, f"{m.group(1)} has no argument {arg!r}"


def test_gcc_is_listed_with_its_real_argument_name():
    # the hand-written list this replaced said `counts`; a model trusting it failed on every call
    assert "cp.GlobalCardinalityCount(vars, vals, occ, closed=False)" in globals_reference()
    assert f"cpmpy {cp.__version__}" in globals_reference()


def test_system_prompt_carries_the_list():
    task = CPTask(id="t", description="Find x.", output_keys=("x",), is_optimization=False)
    assert "cp.GlobalCardinalityCount(vars, vals, occ" in system_prompt(task)
