"""The pieces of a step: Pareto selection, demos, model choice by cost, merge, the trust region."""

from __future__ import annotations

import random

from triforge.maestro.optimize.budget import BudgetedLLM, search_budget
from triforge.maestro.optimize.config_step import config_step, merge_step
from triforge.maestro.optimize.graph_step import graph_step
from triforge.maestro.optimize.pareto import Candidate, Pool
from triforge.maestro.optimize.proposals import RunLog
from triforge.maestro.optimize.rollouts import Rollouts
from triforge.maestro.optimize.runner import Task, optimize
from triforge.maestro.optimize.state import ProgramOptimizeSettings, SearchState
from triforge.maestro.sim_bed import TOOLS, VALIDATORS, SimLM, bridge_task, routing_task
from triforge.maestro.sim_reflection import SimReflection


def _cand(i, scores, parents=()):
    return Candidate(i, bridge_task().program, list(parents), "x", dict(scores))


def test_front_keeps_the_non_dominated_and_selection_follows_wins():
    pool = Pool(["a", "b", "c"])
    pool.add(_cand(0, {"a": 0, "b": 0, "c": 0}))
    pool.add(_cand(1, {"a": 1, "b": 0, "c": 0}))
    pool.add(_cand(2, {"a": 0, "b": 1, "c": 1}))
    pool.add(_cand(3, {"a": 1, "b": 0, "c": 0}))  # ties with 1 everywhere: neither dominates
    assert pool.front() == {1: 1, 2: 2, 3: 1}
    rng = random.Random(0)
    picks = [pool.select(rng).id for _ in range(400)]
    assert 0 not in picks and 150 < picks.count(2) < 250  # weight 2 of 4
    assert pool.best().id == 2


def _state(task, settings, models=None, reflection=None):
    led = search_budget(settings.budget, settings.max_calls)
    ro = Rollouts(task.metric, models or SimLM(), led, retrievers=task.retrievers(), jobs=1)
    refl = BudgetedLLM(reflection or SimReflection(), led, "reflection")
    return SearchState(settings, task.program, task.split("train"), task.split("val"), ro, led, refl, RunLog(None))


def test_demos_come_from_the_module_steps_of_examples_the_parent_got_right():
    t = routing_task()
    from triforge.maestro.optimize.edits import apply_edits

    half = apply_edits(t.program, [{"op": "rewire", "src": "route", "dst": "fact_answer", "when": "kind == 'math'",
                                    "to": "math_answer"}], set())  # math questions now answered right
    task = routing_task()
    task.program = half
    st = _state(task, ProgramOptimizeSettings(budget=500))
    st.add_candidate(half, [], "seed")
    right = [r for r in st.rollouts.run(half, st.train, "train") if r.score == 1.0]
    assert right
    prop = config_step(st, 7)  # move 7 of the rotation: demos, for module 7 % 3 = math_answer
    assert prop.move == "demos" and prop.module == "math_answer"
    assert '"demos": [' in prop.diff and "plus" in prop.diff  # a math question the parent got right
    assert prop.verdict.startswith("rejected: minibatch")  # demos change nothing for the simulated model


def test_a_cheaper_model_is_kept_when_the_score_holds(tmp_path):
    from triforge.maestro.program import Program

    t = bridge_task()
    models = {None: SimLM("dear", 5.0, 10.0), "dear": SimLM("dear", 5.0, 10.0), "cheap": SimLM("cheap", 0.1, 0.2)}
    task = Task("sim", t.program, t.split("train"), t.split("val"), [], t.metric, t.retrievers())
    optimize("config-only", task, models, SimReflection(), ProgramOptimizeSettings(budget=200, models=["dear", "cheap"],
                                                                           patience=15), tmp_path, jobs=1)
    best = Program.load(tmp_path / "best_program.json")
    assert "cheap" in [getattr(n, "model", None) for n in best.nodes]


def test_merge_takes_each_lineages_module_change():
    t = routing_task()
    st = _state(t, ProgramOptimizeSettings(budget=500))
    seed = t.program
    a, b = seed.copy(), seed.copy()
    a.node("math_answer").instruction = "A: compute; reply with only the number."
    b.node("fact_answer").instruction = "B: answer from the facts given; reply with only the short answer."
    ids = [e.id for e in st.val]
    st.pool.add(Candidate(0, seed, [], "seed", dict.fromkeys(ids, 0.0)))
    st.pool.add(Candidate(1, a, [0], "config", {i: float(k == 0) for k, i in enumerate(ids)}))
    st.pool.add(Candidate(2, b, [0], "config", {i: float(k == 1) for k, i in enumerate(ids)}))
    prop = merge_step(st)
    assert prop is not None and prop.move == "merge" and prop.module == "fact_answer"
    assert "A: compute" not in prop.diff and "B: answer" in prop.diff  # parent a, b's change merged in


def test_an_edit_outside_the_trust_region_is_rejected_before_it_runs():
    t = routing_task()
    st = _state(t, ProgramOptimizeSettings(budget=500, max_step_distance=0, tools=TOOLS, validators=VALIDATORS))
    st.add_candidate(t.program, [], "seed")
    spent = st.ledger.spent().rollouts
    prop = graph_step(st)
    assert "outside the trust region" in prop.verdict and prop.child_scores == []
    assert st.ledger.spent().rollouts == spent + len(prop.minibatch_ids)  # only the parent's minibatch


def agent_tool(question: str, project_prompt: str) -> str:
    """An agent run as a tool: it answers right only when its prompt tells it to be careful."""
    return "yes" if "careful" in project_prompt else "no"


class CarefulReflection:
    alias = "r"
    config = SimLM().config

    def complete(self, messages, **kw):
        from triforge.core.llm import Completion

        assert "Solve it." in messages[-1]["content"]  # it is shown the tool's current prompt
        return Completion("<instruction>Solve it. Be careful.</instruction>")


def test_a_tool_modules_prompt_argument_is_rewritten_like_an_instruction(tmp_path):
    from triforge.maestro.benchmarks.base import Example, MetricResult
    from triforge.maestro.program import Program, ProgramBuilder

    b = ProgramBuilder("agent", inputs=["question"], outputs=["answer"])
    b.tool("agent", "test_optimize_steps:agent_tool", inputs=["question"], outputs=["answer"],
           args={"project_prompt": "Solve it."})
    examples = [Example(f"q{i}", {"question": f"q{i}"}, {}) for i in range(12)]

    def metric(ex, run):
        return MetricResult(float(run.outputs.get("answer") == "yes"), "the answer must be yes")

    task = Task("toy", b.build(), examples[:6], examples[6:9], examples[9:], metric)
    s = optimize("config-only", task, SimLM(), CarefulReflection(), ProgramOptimizeSettings(budget=40), tmp_path, jobs=1)
    assert s["test_best"] == 1.0 and s["test_seed"] == 0.0
    assert Program.load(tmp_path / "best_program.json").node("agent").args["project_prompt"] == "Solve it. Be careful."
