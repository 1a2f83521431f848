"""What cpagent offers other subsystems, in plain data: the `cpbench` entry point (`triforge.core.entry_points`).

maestro's CP-Bench benchmark runs the agent through these functions and imports no cpagent module; the
contract it relies on is `triforge.maestro.benchmarks.cpbench.CPBenchEntry`.

    problem_ids(data_root) -> list[str]
    project_prompt() -> str                          the built-in project prompt (Jinja text)
    solve(problem_id, data_root, *, llm, ...) -> dict   `attempt`: the agent, then strict grading
    grade(problem_id, data_root, code, solver="ortools") -> dict   the strict grade of a program's text
    problem_hash(problem_id, data_root) -> str       the problem's content (text, data, reference, instances)
"""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from triforge.core.llm import LLM
from triforge.core.react import AgentLimits
from triforge.cpagent import dataset
from triforge.cpagent.agent import CPAgentConfig
from triforge.cpagent.run_settings import task_hash
from triforge.cpagent.solve import attempt, grade_code
from triforge.cpagent.task import PROMPTS, CPTask, task_from_problem


def problem_ids(data_root: str) -> list[str]:
    return dataset.problem_ids(data_root)


def project_prompt() -> str:
    return (PROMPTS / "project.md.j2").read_text(encoding="utf-8")


@lru_cache(maxsize=256)
def _task(data_root: str, problem_id: str) -> CPTask:
    return task_from_problem(dataset.load_problem(data_root, problem_id))


def solve(
    problem_id: str,
    data_root: str,
    *,
    llm: LLM,
    sample: int = 0,
    project_prompt: str | None = None,
    max_steps: int = 30,
    max_wall_s: float | None = None,
    max_cost_usd: float | None = None,
    fresh_check: bool = True,
    cell_timeout_s: float = 60.0,
    temperature: float | None = None,
) -> dict[str, Any]:
    """`attempt` on one problem; `project_prompt` is the Jinja text of the project prompt (None: the built-in).
    The record's `status` says how the agent ended (`budget_exceeded` and `endpoint_error` included)."""
    task = _task(data_root, problem_id)
    with tempfile.TemporaryDirectory(prefix="triforge-cpbench-") as d:
        prompt_path = None
        if project_prompt:
            prompt_path = Path(d) / "project.md.j2"
            prompt_path.write_text(project_prompt, encoding="utf-8")
        config = CPAgentConfig(
            limits=AgentLimits(max_steps=max_steps, max_wall_s=max_wall_s, max_cost_usd=max_cost_usd),
            project_prompt=prompt_path,
            fresh_check=fresh_check,
            cell_timeout_s=cell_timeout_s,
            temperature=temperature,
            sample=sample,
        )
        return attempt(task, llm, config=config)


def grade(problem_id: str, data_root: str, code: str, solver: str = "ortools") -> dict[str, Any]:
    return grade_code(_task(data_root, problem_id), code, solver)


def problem_hash(problem_id: str, data_root: str) -> str:
    return task_hash(_task(data_root, problem_id))
