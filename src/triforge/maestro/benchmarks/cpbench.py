"""CP-Bench for maestro: the cpagent pipeline as a program node, graded by the strict cpagent grader.

maestro imports no cpagent module: cpagent offers CP-Bench as the `cpbench` entry point
(`triforge.core.entry_points`, provided by `triforge.cpagent.api`), whose functions `CPBenchEntry` lists:
the problem ids, the agent run and its grading (the path `cpagent solve` and `bench` take), the grader.
The agent's project prompt, limits and model are the node's config, so maestro can optimize them; a
problem counts as solved only when every instance is graded correct.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from triforge.core import entry_points
from triforge.core.errors import BudgetExceeded, EndpointError, UserError
from triforge.maestro.benchmarks.base import Example, MetricResult

ENV_VAR = "TRIFORGE_CPBENCH"
SPLITS = ("train", "val", "test", "all")


def resolve_data(path: str | os.PathLike[str] | None = None) -> Path:
    """A data set's name (None: $TRIFORGE_CPBENCH, else the bundled `dcp-bench-open`) or a path, as a path."""
    from triforge.data import resolve_path

    return resolve_path(path, "cpbench")


@runtime_checkable
class CPBenchEntry(Protocol):
    """What maestro needs from the `cpbench` entry point (records and grades are cpagent's plain dicts)."""

    def problem_ids(self, data_root: str) -> list[str]: ...

    def project_prompt(self) -> str: ...

    def solve(self, problem_id: str, data_root: str, *, llm: Any, **config: Any) -> dict[str, Any]: ...

    def grade(self, problem_id: str, data_root: str, code: str, solver: str = "ortools") -> dict[str, Any]: ...

    def problem_hash(self, problem_id: str, data_root: str) -> str: ...


def cpagent_entry() -> CPBenchEntry:
    return entry_points.load("cpbench")  # type: ignore[no-any-return]


def solve(
    problem_id: str,
    data_root: str,
    *,
    llm: Any,
    sample: int = 0,
    project_prompt: str | None = None,
    max_steps: int = 30,
    max_wall_s: float | None = None,
    max_cost_usd: float | None = None,
    fresh_check: bool = True,
    cell_timeout_s: float = 60.0,
    temperature: float | None = None,
) -> dict[str, Any]:
    """Run cpagent's evaluation path (the agent, then strict grading) on one problem.

    `project_prompt` is the Jinja text of the project prompt. A spent budget or a failed endpoint is raised,
    never turned into a score: the evaluation stops (budget) or the example is run again on resume (endpoint).
    """
    record = cpagent_entry().solve(
        problem_id, data_root, llm=llm, sample=sample, project_prompt=project_prompt, max_steps=max_steps,
        max_wall_s=max_wall_s, max_cost_usd=max_cost_usd, fresh_check=fresh_check, cell_timeout_s=cell_timeout_s,
        temperature=temperature)
    if record["status"] == "budget_exceeded":
        raise BudgetExceeded(record["message"])
    if record["status"] == "endpoint_error":
        raise EndpointError(record["message"])
    return {"code": record.get("code", ""), "status": record["status"], "message": record["message"],
            "grade": record["grade"]}


def verdict_feedback(
    verdicts: list[dict[str, Any]], status: str = "submitted", message: str = ""
) -> MetricResult:
    """Score 1 only when every instance is correct; feedback names each failing instance and why."""
    if not verdicts:
        why = f" ({status}: {message})" if message else f" ({status})"
        return MetricResult(
            0.0,
            f"The agent submitted no program{why}, so nothing could be graded.",
            {"status": status, "instances": []},
        )
    bad = [v for v in verdicts if v.get("verdict") != "correct"]
    n = len(verdicts)
    details = {"status": status, "instances": verdicts, "correct_instances": n - len(bad)}
    if not bad:
        return MetricResult(1.0, f"Correct on all {n} instance(s).", details)
    lines = [f"Incorrect on {len(bad)} of {n} instance(s):"]
    for v in bad[:8]:
        reasons = "; ".join(str(r) for r in v.get("reasons", [])[:3]) or "no reason given"
        lines.append(f"- instance {v.get('instance')}: {v.get('verdict')}: {reasons[:400]}")
    return MetricResult(0.0, "\n".join(lines), details)


def split_ids(
    ids: list[str], split: str, seed: int = 0, fractions: tuple[float, float] = (0.5, 0.25)
) -> list[str]:
    if split not in SPLITS:
        raise UserError(f"unknown CP-Bench split {split!r}: use one of {', '.join(SPLITS)}")
    if split == "all":
        return list(ids)
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    n_train, n_val = int(len(order) * fractions[0]), int(len(order) * fractions[1])
    return {
        "train": order[:n_train],
        "val": order[n_train : n_train + n_val],
        "test": order[n_train + n_val :],
    }[split]


class CPBench:
    name = "cpbench"
    splits = SPLITS
    default_jobs = 4  # each example runs an IPython kernel and solver subprocesses

    def __init__(self, data: str | None = None, seed: int = 0, solver: str = "ortools") -> None:
        self._data, self._seed, self.solver = data, seed, solver

    @property
    def root(self) -> Path:
        return resolve_data(self._data)

    def examples(self, split: str) -> list[Example]:
        root = str(self.root)
        return [
            Example(id=pid, inputs={"problem_id": pid, "data_root": root})
            for pid in split_ids(cpagent_entry().problem_ids(root), split, self._seed)
        ]

    def metric(self, example: Example, run: Any) -> MetricResult:
        """The agent node's grade (cpagent's grader); code from any other node is graded the same way."""
        code = str(run.outputs.get("code") or "")
        status, message = str(run.state.get("status", "")), str(run.state.get("message", ""))
        if not code:
            return verdict_feedback([], status or "not_submitted", message)
        grade = run.state.get("grade")
        if not (isinstance(grade, dict) and "instances" in grade and run.state.get("code") == code
                and self.solver == "ortools"):  # the node graded with the default solver
            grade = cpagent_entry().grade(example.id, str(example.inputs["data_root"]), code, self.solver)
        return verdict_feedback(grade["instances"], status, message)

    def example_hash(self, example: Example) -> str:
        """The problem's content (text, data, reference, instances): the inputs only name it."""
        return cpagent_entry().problem_hash(example.id, str(example.inputs["data_root"]))

    def seed_program(self) -> Any:
        from triforge.maestro.programs.cpbench import cpbench_seed

        return cpbench_seed()

    def retrievers(self) -> dict[str, Any]:
        return {}
