"""CP-Bench as a maestro benchmark: the cpagent as a program node, graded by the strict grader."""

from __future__ import annotations

import json

import pytest

from triforge.maestro.bench import open_benchmark
from triforge.maestro.benchmarks.cpbench import split_ids, verdict_feedback
from triforge.maestro.evaluate import evaluate
from triforge.maestro.interpreter import ProgramRun
from triforge.maestro.nodes import ToolNode
from triforge.maestro.programs.cpbench import SOLVE_FN, builtin_project_prompt, cpbench_seed
from triforge.testing.scripted import ScriptedLLM, call


def test_seed_program_carries_the_agent_config():
    p = cpbench_seed(max_steps=12)
    node = p.node("cpagent")
    assert isinstance(node, ToolNode) and node.fn == SOLVE_FN
    assert node.args["project_prompt"] == builtin_project_prompt() and len(node.args["project_prompt"]) > 200
    assert node.args["max_steps"] == 12 and p.inputs == ["problem_id", "data_root"] and p.outputs == ["code"]


def test_verdict_feedback():
    none = verdict_feedback([], "limits_exceeded", "max_steps reached")
    assert none.score == 0 and "submitted no program (limits_exceeded: max_steps reached)" in none.feedback
    ok = verdict_feedback([{"instance": 0, "verdict": "correct"}, {"instance": 1, "verdict": "correct"}])
    assert ok.score == 1.0 and ok.feedback == "Correct on all 2 instance(s)."
    bad = verdict_feedback([{"instance": 0, "verdict": "correct"},
                            {"instance": 1, "verdict": "timeout", "reasons": ["no output within 60 s"]}])
    assert bad.score == 0.0 and bad.details["correct_instances"] == 1
    assert "Incorrect on 1 of 2" in bad.feedback and "instance 1: timeout: no output within 60 s" in bad.feedback


def test_split_ids():
    ids = [f"p{i:03d}" for i in range(101)]
    parts = {s: split_ids(ids, s) for s in ("train", "val", "test")}
    assert [len(v) for v in parts.values()] == [50, 25, 26]
    assert sorted(sum(parts.values(), [])) == ids and split_ids(list(reversed(ids)), "val") == parts["val"]


def test_no_code_scores_zero_without_grading():
    bench = open_benchmark("cpbench", data="/nonexistent")
    run = ProgramRun({"code": ""}, {"status": "limits_exceeded", "message": "30 steps"}, [])
    from triforge.maestro.benchmarks.base import Example

    r = bench.metric(Example("x", {"problem_id": "x", "data_root": "/nonexistent"}), run)
    assert r.score == 0 and "limits_exceeded: 30 steps" in r.feedback


@pytest.fixture
def cpbench():
    pytest.importorskip("cpmpy")
    return open_benchmark("cpbench")  # the bundled dcp-bench-open


def test_loads_all_problems(cpbench):
    exs = cpbench.examples("all")
    assert len(exs) == 101 and exs[0].inputs["problem_id"] == exs[0].id
    assert len(cpbench.examples("train")) + len(cpbench.examples("val")) + len(cpbench.examples("test")) == 101


def test_agent_node_and_strict_grader_end_to_end(cpbench):
    from triforge.cpagent.dataset import load_problem

    ex = next(e for e in cpbench.examples("all") if e.id == "abbots_puzzle")
    problem = load_problem(ex.inputs["data_root"], ex.id)
    zeros = json.dumps({k: 0 for k in problem.output_keys})
    planted = f"import json\nprint(json.dumps({zeros}))\n"  # every key 0: breaks the puzzle's constraints
    llm = ScriptedLLM([call("submit", code=problem.reference_source), call("submit", code=planted)])
    prog = cpbench_seed()
    right = evaluate(prog, [ex], cpbench.metric, llm, jobs=1).results[0]
    assert right.score == 1.0 and right.feedback == "Correct on all 1 instance(s)."
    assert right.outputs["code"] == problem.reference_source
    edited = prog.copy()
    edited.node("cpagent").args["project_prompt"] = "EDITED PROMPT; keys: {{ output_keys | join(', ') }}"
    wrong = evaluate(edited, [ex], cpbench.metric, llm, jobs=1).results[0]
    assert llm.requests[1]["messages"][0]["content"].startswith("EDITED PROMPT; keys: men, women, children")
    assert wrong.score == 0.0 and "instance 0: incorrect" in wrong.feedback
    llm.assert_done()


def test_a_spent_budget_stops_the_evaluation_and_scores_nothing(cpbench, tmp_path):
    """The node once swallowed BudgetExceeded: the example scored 0 and was cached as a result."""
    from triforge.core import context
    from triforge.core.budget import Budget, BudgetLimits
    from triforge.core.errors import BudgetExceeded
    from triforge.maestro.evaluate import ResultStore

    exs = [e for e in cpbench.examples("all") if e.id in ("abbots_puzzle", "among")]
    store = ResultStore(tmp_path / "results.jsonl")
    llm = ScriptedLLM([call("python_exec", code="1")] * 4)
    with context.use(budget=Budget(BudgetLimits(max_calls=1))), pytest.raises(BudgetExceeded):
        evaluate(cpbench_seed(), exs, cpbench.metric, llm, jobs=1, store=store)
    assert len(store) == 0 and not (tmp_path / "results.jsonl").exists()


def test_an_endpoint_failure_is_not_a_score_to_keep(cpbench, tmp_path):
    from triforge.core.config import ModelConfig
    from triforge.core.llm import OpenAICompatLLM
    from triforge.maestro.evaluate import ResultStore
    from triforge.testing.fake_server import FakeOpenAIServer

    ex = next(e for e in cpbench.examples("all") if e.id == "abbots_puzzle")
    store = ResultStore(tmp_path / "results.jsonl")
    with FakeOpenAIServer([{"fault": "500"}] * 2) as srv:
        llm = OpenAICompatLLM("f", ModelConfig(model="m", base_url=srv.base_url, max_retries=0))
        r = evaluate(cpbench_seed(), [ex], cpbench.metric, llm, jobs=1, store=store).results[0]
    assert r.error_kind == "endpoint" and r.score == 0 and len(store) == 0  # run again on resume


def test_one_grading_path_for_code_from_any_node(cpbench):
    """Code the agent node did not grade (another node wrote it) goes through cpagent's grader too."""
    from triforge.cpagent.dataset import load_problem

    ex = next(e for e in cpbench.examples("all") if e.id == "abbots_puzzle")
    ref = load_problem(ex.inputs["data_root"], ex.id).reference_source
    right = cpbench.metric(ex, ProgramRun({"code": ref}, {"code": ref, "status": "submitted"}, []))
    wrong = ref.replace("men * 5 == women", "men * 4 == women")
    bad = cpbench.metric(ex, ProgramRun({"code": wrong}, {"code": wrong, "status": "submitted"}, []))
    assert right.score == 1.0 and bad.score == 0.0 and bad.details["instances"][0]["verdict"] != "correct"
    assert cpbench.example_hash(ex) != cpbench.example_hash(next(e for e in cpbench.examples("all")
                                                                    if e.id == "among"))
