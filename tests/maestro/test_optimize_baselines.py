"""GEPA (the real package, through our adapter) and our MIPROv2 implementation do real work on our programs,
inside our ledger: a task whose only defect is an instruction is fixed by both."""

from __future__ import annotations

import pytest

from triforge.core.llm import Completion, Usage
from triforge.maestro.optimize.edits import apply_edits
from triforge.maestro.optimize.runner import Task, optimize
from triforge.maestro.optimize.state import ProgramOptimizeSettings
from triforge.maestro.sim_bed import TOOLS, SimLM, calculator_task

CALC = "triforge.maestro.sim_bed:calculator"


class FixedReflection:
    """Answers any instruction request with one better instruction, in both formats the prompts ask for."""

    alias = "fixed"
    config = SimLM().config

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def complete(self, messages, **kw):
        self.prompts.append(str(messages[-1]["content"]))
        text = "Answer the question. Reply with only the short answer."
        return Completion(f"```\n{text}\n```\n<instruction>{text}</instruction>", usage=Usage(10, 10))


def _instruction_only_task() -> Task:
    t = calculator_task()
    fixed_structure = apply_edits(t.program, [{"op": "add_tool", "target": "answer", "node": {
        "name": "calc", "fn": CALC, "inputs": {"text": "question"}, "outputs": ["result"]}}], set(TOOLS))
    return Task("sim", fixed_structure, t.split("train"), t.split("val"), t.split("test"), t.metric)


@pytest.mark.parametrize("optimizer", ["gepa", "mipro"])
def test_baseline_fixes_an_instruction_defect_within_the_ledger(optimizer, tmp_path):
    pytest.importorskip("gepa" if optimizer == "gepa" else "optuna")
    refl = FixedReflection()
    s = optimize(optimizer, _instruction_only_task(), SimLM(), refl, ProgramOptimizeSettings(budget=80, max_calls=400),
                 tmp_path, jobs=2)
    assert s["test_seed"] == 0.5 and s["test_best"] == 1.0  # wrapped answers -> bare answers
    assert s["spent"]["search_rollouts"] <= 80 and s["search_calls"] <= 400
    assert s["spent"]["calls"]["reflection"] == len(refl.prompts) > 0  # its reflection went through our ledger
    assert (tmp_path / "proposals.jsonl").read_text().strip()


def test_gepa_is_stopped_by_our_ledger_and_keeps_its_best(tmp_path):
    pytest.importorskip("gepa")
    s = optimize("gepa", _instruction_only_task(), SimLM(), FixedReflection(), ProgramOptimizeSettings(budget=7), tmp_path,
                 jobs=1)
    assert s["spent"]["search_rollouts"] <= 7 and "rollout budget" in s["stop_reason"]
