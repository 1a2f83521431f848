"""`cpagent solve` into an existing run directory: a finished result is reused only with the same settings,
and a budget stop is never a finished result."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from triforge.core.budget import Budget, BudgetLimits
from triforge.core.provenance import StaleResults
from triforge.core.react import AgentLimits
from triforge.cpagent.agent import CPAgentConfig
from triforge.cpagent.solve import solve_task
from triforge.cpagent.task import CPTask
from triforge.testing.scripted import ScriptedLLM, call

TASK = CPTask(id="pick", description="Choose integers x and y in 0..9 with x + y == 12 and x - y == 2.",
              data="total = 12\ndiff = 2", output_keys=("x", "y"))
GOOD = ("import json\nimport cpmpy as cp\nx, y = cp.intvar(0, 9, shape=2, name=['x', 'y'])\n"
        "m = cp.Model(x + y == 12, x - y == 2)\nassert m.solve()\nprint(json.dumps({'x': int(x.value()), "
        "'y': int(y.value())}))\n")


def scripted(*steps, **config) -> ScriptedLLM:
    llm = ScriptedLLM(list(steps))
    llm.config = llm.config.model_copy(update=config)
    return llm


def test_a_budget_stop_is_run_again_on_resume(tmp_path):
    out = tmp_path / "run"
    stopped = solve_task(TASK, scripted(call("python_exec", code="1"), call("python_exec", code="2")), out,
                         budget=Budget(BudgetLimits(max_calls=1)))
    assert stopped["status"] == "budget_exceeded"
    llm = scripted(call("submit", code=GOOD))
    rec = solve_task(TASK, llm, out, budget=Budget(BudgetLimits(max_calls=5)))  # the budget now allows it
    assert rec["status"] == "submitted" and rec["grade"]["status"] == "ungraded" and llm.remaining == 0
    assert json.loads((out / "results.json").read_text())["status"] == "submitted"


def test_a_finished_result_is_reused_only_with_the_same_settings(tmp_path):
    out = tmp_path / "run"
    first = solve_task(TASK, scripted(call("submit", code=GOOD)), out)
    assert first["status"] == "submitted" and first["settings_hash"] and "commit" in first and first["item_hash"]
    assert solve_task(TASK, scripted(), out) == first  # same settings: the finished record, nothing asked
    others = [
        (scripted(model="model-b"), CPAgentConfig(), TASK, "model.model"),
        (scripted(base_url="http://127.0.0.1:1/v1"), CPAgentConfig(), TASK, "model.base_url"),
        (scripted(temperature=0.7), CPAgentConfig(), TASK, "model.temperature"),
        (scripted(extra_body={"top_k": 3}), CPAgentConfig(), TASK, "model.extra_body"),
        (scripted(), CPAgentConfig(limits=AgentLimits(max_steps=5)), TASK, "agent.limits"),
        (scripted(), CPAgentConfig(fresh_check=False), TASK, "agent.fresh_check"),
        (scripted(), CPAgentConfig(), replace(TASK, data="total = 13\ndiff = 2"), "task"),
    ]
    for llm, config, task, field in others:
        with pytest.raises(StaleResults, match=rf"\({field} differs\); use a new --out or --fresh"):
            solve_task(task, llm, out, config=config)
        assert llm.remaining == 0 and not llm.requests
    prompt = tmp_path / "project.md.j2"
    prompt.write_text("Write a CPMpy model. Keys: {{ output_keys | join(', ') }}")
    with pytest.raises(StaleResults, match=r"prompts\.project"):
        solve_task(TASK, scripted(), out, config=CPAgentConfig(project_prompt=prompt))
    llm = scripted(call("submit", code=GOOD), model="model-b")
    again = solve_task(TASK, llm, out, fresh=True)
    assert again["status"] == "submitted" and llm.remaining == 0 and again["settings_hash"] != first["settings_hash"]
    moved = tmp_path / "run" / again["moved_aside"].rsplit("/", 1)[-1]
    assert json.loads((moved / "results.json").read_text()) == first  # the earlier result is kept, aside
