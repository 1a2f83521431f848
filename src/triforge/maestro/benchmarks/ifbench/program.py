"""The IFBench seed program's stages: answer the query, then rewrite the answer to satisfy its constraints.

This is the two-stage agent GEPA starts from on IFBench, kept as plain data (stages with instructions,
named inputs and one output); the maestro program graph builds its seed from them
(`triforge.maestro.programs.ifbench`) and runs it with maestro's executor.
"""

from __future__ import annotations

from dataclasses import dataclass


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

