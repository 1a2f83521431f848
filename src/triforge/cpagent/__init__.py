"""cpagent: CP-Bench data set loader, reference runner, strict grader (and the agent built on them).

The harness API, importable from here (loaded on first use, so `import triforge.cpagent` stays cheap):

    load_dataset(path, ids=None) -> list[Problem]
    load_problem(path, problem_id) -> Problem
    run_reference(problem, instance=0, *, timeout_s=None) -> RefResult
    run_references(problems, *, jobs=2, on_done=None, cache=None) -> list[RefResult]
    grade_output(problem, stdout, instance=0, *, solver="ortools", reference=None, cache=None) -> Verdict
    grade_solutions(problem, solutions, instance=0, *, solver="ortools", reference=None, cache=None) -> list[Verdict]
    grade_program(problem, program_path, instances=None, *, solver="ortools", cache=None,
                  model_check="sample") -> list[Verdict]   (model_check: off | sample | full; model_check.py)

The agent's one evaluation path (maestro's CP-Bench benchmark goes through it):

    task_from_problem(problem) -> CPTask
    attempt(task, llm, *, config=None, sandbox=None, run_dir=None, grade=True) -> dict  (agent run, then grading)
    grade_code(task, code, solver="ortools", fresh=None) -> dict  (the strict grade of a program's text)
    task_hash(task) -> str  (the problem's content, for resume checks)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Problem": "dataset",
    "load_dataset": "dataset",
    "load_problem": "dataset",
    "RefResult": "refs",
    "RefCache": "refs",
    "run_reference": "refs",
    "run_references": "refs",
    "Verdict": "grader",
    "VERDICTS": "grader",
    "grade_output": "grader",
    "grade_solutions": "grader",
    "grade_program": "grader",
    "CPAgentConfig": "agent",
    "CPTask": "task",
    "task_from_problem": "task",
    "attempt": "solve",
    "grade_code": "solve",
    "task_hash": "run_settings",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"triforge.cpagent.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'triforge.cpagent' has no attribute {name!r}")
