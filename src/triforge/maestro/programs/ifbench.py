"""Seed program for IFBench: answer the prompt, then rewrite the answer to satisfy its constraints.

Built from the IFBench stages (`triforge.maestro.benchmarks.ifbench.program.SEED_STAGES`), so the
instructions live in one place. Replies use field markers: a constrained response (JSON, quotes,
exact line counts) survives them unchanged, where a JSON wrapper would have to escape it.
"""

from __future__ import annotations

from triforge.maestro.program import Program, ProgramBuilder


def ifbench_seed() -> Program:
    from triforge.maestro.benchmarks.ifbench.program import SEED_STAGES

    b = ProgramBuilder("ifbench_answer_rewrite", inputs=["prompt"], outputs=["response"],
                       description="Answer the prompt, then rewrite the draft to follow every constraint.")
    for stage in SEED_STAGES:
        inputs = {name: ("prompt" if name == "query" else name) for name in stage.inputs}
        b.llm(stage.name, inputs=inputs, outputs=[stage.output], instruction=stage.instructions,
              format="markers")
    return b.build()
