"""What a cpagent result depends on: the settings fingerprints of `cpagent solve` and `cpagent bench`.

A result is reused on resume only when these are the same (`triforge.core.provenance`): the model and
its endpoint and decoding settings, every agent setting, the prompt templates (and the CPMpy reference
rendered into the system prompt), and the problem's content.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from triforge.core.provenance import Fingerprint, content_hash, model_settings
from triforge.cpagent.agent import CPAgentConfig
from triforge.cpagent.task import PROMPTS, CPTask


def task_hash(task: CPTask) -> str:
    """The problem as the agent and the grader see it: text, data, keys, limits and the reference."""
    problem: Any = task.problem
    reference = None
    if problem is not None:
        reference = {"source": getattr(problem, "reference_source", None),
                     "instances": getattr(problem, "instances", None)}
    return content_hash({"id": task.id, "description": task.description, "data": task.data,
                         "output_keys": list(task.output_keys), "optimization": task.is_optimization,
                         "time_limit_s": task.time_limit_s, "reference": reference})


def agent_settings(config: CPAgentConfig) -> dict[str, Any]:
    """Every field of the agent's config; the project prompt by its file's content, not its path."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    out = {k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v
           for k, v in values.items()}
    out["project_prompt"] = "built-in" if config.project_prompt is None else "custom"
    return out


def prompt_hashes(config: CPAgentConfig) -> dict[str, str]:
    """The templates of the system and task prompts, and the CPMpy reference rendered into the system prompt."""
    from triforge.cpagent.cpmpy_api import globals_reference

    project = Path(config.project_prompt) if config.project_prompt is not None else PROMPTS / "project.md.j2"
    return {"project": content_hash(project.read_text(encoding="utf-8")) if project.is_file() else "missing",
            "task": content_hash((PROMPTS / "task.md.j2").read_text(encoding="utf-8")),
            "cpmpy_reference": content_hash(globals_reference())}


def solve_fingerprint(task: CPTask, llm: Any, config: CPAgentConfig) -> Fingerprint:
    return Fingerprint.of(kind="cpagent solve", task=task_hash(task), model=model_settings(llm),
                          agent=agent_settings(config), prompts=prompt_hashes(config))


def bench_fingerprint(llm: Any, config: CPAgentConfig, *, data: str | None) -> Fingerprint:
    """The settings shared by every problem of a benchmark (each problem's content is its row's item hash)."""
    return Fingerprint.of(kind="cpagent bench", data=data, model=model_settings(llm), agent=agent_settings(config),
                          prompts=prompt_hashes(config))
