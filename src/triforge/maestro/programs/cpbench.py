"""Seed program for CP-Bench: one tool node running the cpagent, its prompt and limits as config.

The node runs cpagent's own evaluation path and also writes its strict grade (`grade`), which the
benchmark's metric reads instead of grading again.

The project prompt text is copied into the program (cpagent's built-in template) so the optimizer can
read and edit it like any instruction.
"""

from __future__ import annotations

from triforge.core import entry_points
from triforge.maestro.program import Program, ProgramBuilder

SOLVE_FN = "triforge.maestro.benchmarks.cpbench:solve"


def builtin_project_prompt() -> str:
    """cpagent's own project prompt, through the `cpbench` entry point (see `benchmarks.cpbench.CPBenchEntry`)."""
    return entry_points.load("cpbench").project_prompt()  # type: ignore[no-any-return]


def cpbench_seed(max_steps: int = 30, cell_timeout_s: float = 60.0) -> Program:
    b = ProgramBuilder("cpbench_cpagent", inputs=["problem_id", "data_root"], outputs=["code"],
                       types={"grade": "json"},
                       description="The cpagent (ReAct over an IPython kernel) writes a CPMpy program.")
    b.tool("cpagent", SOLVE_FN, inputs=["problem_id", "data_root"], outputs=["code", "status", "message", "grade"],
           args={"project_prompt": builtin_project_prompt(), "max_steps": max_steps,
                 "cell_timeout_s": cell_timeout_s, "fresh_check": True})
    return b.build()
