"""The IFBench seed program: answer the query, then rewrite the answer to satisfy its constraints.

This is the two-stage agent GEPA starts from on IFBench. It is kept as plain data
(stages with instructions, named inputs and one output) plus a small runner over any
chat-completion callable, so the maestro program graph can import the stages as its
seed and tests can run it with a scripted model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

Message = dict[str, str]
Complete = Callable[[list[Message]], str]


@dataclass(frozen=True)
class Stage:
    """One LM call: `instructions` as the system message, `inputs` rendered as fields, one `output`."""

    name: str
    instructions: str
    inputs: tuple[str, ...]
    output: str


ANSWER = Stage(
    name="answer",
    instructions="Respond to the query.",
    inputs=("query",),
    output="draft_response",
)

REWRITE = Stage(
    name="rewrite",
    instructions=(
        "Rewrite the draft response so that it follows every constraint stated in the query exactly "
        "(format, counts, words to use or avoid, structure), while still answering the query. "
        "Output only the final response."
    ),
    inputs=("query", "draft_response"),
    output="response",
)

SEED_STAGES: tuple[Stage, ...] = (ANSWER, REWRITE)


def stage_messages(stage: Stage, values: dict[str, str]) -> list[Message]:
    """Chat messages for one stage: instructions, then each input as a labelled field."""
    missing = [k for k in stage.inputs if k not in values]
    if missing:
        raise KeyError(f"stage {stage.name!r} needs inputs {missing}")
    fields = "\n\n".join(f"[{name}]\n{values[name]}" for name in stage.inputs)
    return [
        {"role": "system", "content": stage.instructions},
        {"role": "user", "content": f"{fields}\n\nRespond with the {stage.output} only."},
    ]


def run_program(query: str, complete: Complete, stages: Sequence[Stage] = SEED_STAGES) -> dict[str, str]:
    """Run the stages in order; returns every value produced, the last stage's output included."""
    values = {"query": query}
    for stage in stages:
        values[stage.output] = complete(stage_messages(stage, values)).strip()
    return values
