"""What the cpagent is asked to solve: a CP-Bench problem or a problem written in a text/Markdown file."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, StrictUndefined

from triforge.core.errors import UserError
from triforge.core.textfile import read_user_text

PROMPTS = Path(__file__).resolve().parent / "prompts"
_JINJA = Environment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)

_KEYS_LINE = re.compile(r"^\s*(?:output keys|keys)\s*:\s*(.+)$", re.I | re.M)
_JSON_FENCE = re.compile(r"```json\s*(\{.*?\})\s*```", re.S)
_OPTIM = re.compile(r"\b(minimi[sz]e|maximi[sz]e|optimal|minimum|maximum)\b", re.I)


@dataclass(frozen=True)
class CPTask:
    id: str
    description: str
    data: str = ""  # the data block body, without its marker lines
    output_keys: tuple[str, ...] = ()  # empty: the output format is unknown, so the result cannot be graded
    is_optimization: bool = False
    time_limit_s: float = 60.0
    problem: object | None = None  # the CP-Bench Problem when there is one (for grading)

    @property
    def gradable(self) -> bool:
        return self.problem is not None


def task_from_problem(problem) -> CPTask:
    """A CP-Bench problem (`triforge.cpagent.dataset.Problem`) as an agent task."""
    return CPTask(
        id=problem.id,
        description=problem.description,
        data=problem.default_data.strip("\n"),
        output_keys=tuple(problem.output_keys),
        is_optimization=bool(problem.is_optimization),
        time_limit_s=float(problem.time_limit_s),
        problem=problem,
    )


def task_from_file(path: str | Path) -> CPTask:
    """A problem written in plain text or Markdown.

    The required output keys come from a line `Output keys: a, b, c` or from the first fenced ```json
    example object; without either, the agent still runs but the result cannot be graded.
    """
    p = Path(path)
    text = read_user_text(p, "problem file").strip()
    if not text:
        raise UserError(f"problem file {p} is empty")
    keys: tuple[str, ...] = ()
    if m := _KEYS_LINE.search(text):
        keys = tuple(k.strip().strip("`\"'") for k in m.group(1).split(",") if k.strip())
    elif m := _JSON_FENCE.search(text):
        try:
            example = json.loads(m.group(1))
            keys = tuple(example) if isinstance(example, dict) else ()
        except json.JSONDecodeError:
            keys = ()
    return CPTask(id=p.stem, description=text, output_keys=keys, is_optimization=bool(_OPTIM.search(text)))


def render(template: str | Path, **values: object) -> str:
    path = Path(template)
    try:
        source = path.read_text(encoding="utf-8") if path.is_file() else (PROMPTS / str(template)).read_text()
    except FileNotFoundError:
        raise UserError(f"prompt template {template} not found") from None
    return _JINJA.from_string(source).render(**values).strip() + "\n"


def system_prompt(task: CPTask, project_prompt: str | Path | None = None) -> str:
    from triforge.cpagent.cpmpy_api import globals_reference

    return render(project_prompt or "project.md.j2", is_optimization=task.is_optimization,
                  output_keys=list(task.output_keys), cpmpy_globals=globals_reference())


def task_prompt(task: CPTask) -> str:
    return render("task.md.j2", description=task.description, data=task.data,
                  output_keys=list(task.output_keys), is_optimization=task.is_optimization)
