"""The IFBench seed program (answer, then rewrite) run through the executor and graded by the IFBench metric."""

from __future__ import annotations

from triforge.maestro.bench import open_benchmark
from triforge.maestro.benchmarks.ifbench import IFBenchExample
from triforge.maestro.benchmarks.ifbench.program import SEED_STAGES
from triforge.maestro.evaluate import evaluate
from triforge.maestro.nodes import LLMNode
from triforge.maestro.programs.ifbench import ifbench_seed
from triforge.testing.scripted import ScriptedLLM

EXAMPLE = IFBenchExample(
    id="k1", inputs={"prompt": "Describe rain. Use between 2 and 4 words. Do not use any whitespace."},
    gold={"instruction_id_list": ["count:word_count_range", "format:no_whitespace"],
          "kwargs": [{"min_words": 2, "max_words": 4}, {}]})


def test_seed_mirrors_the_ifbench_stages():
    p = ifbench_seed()
    assert [n.name for n in p.nodes] == [s.name for s in SEED_STAGES]
    rewrite = p.node("rewrite")
    assert isinstance(rewrite, LLMNode) and rewrite.instruction == SEED_STAGES[1].instructions
    assert rewrite.inputs == {"query": "prompt", "draft_response": "draft_response"}
    assert p.inputs == ["prompt"] and p.outputs == ["response"] and rewrite.format == "markers"


def test_answer_then_rewrite_graded_with_feedback_on_failed_constraints():
    bench = open_benchmark("ifbench", data="/unused", mode="strict")

    def rewrite(messages, tools):
        user = messages[-1]["content"]
        assert "<draft_response>\nRain falls softly on the roof\n</draft_response>" in user
        assert "<query>\nDescribe rain." in user
        return "<response>\nRain falls softly\n</response>"

    llm = ScriptedLLM(["<draft_response>Rain falls softly on the roof</draft_response>", rewrite])
    r = evaluate(ifbench_seed(), [EXAMPLE], bench.metric, llm).results[0]
    assert r.outputs == {"response": "Rain falls softly"}
    assert r.score == 0.5 and r.details["follow_instruction_list"] == [True, False]
    assert "1 of 2 constraints failed" in r.feedback and "whitespace" in r.feedback
    llm3 = ScriptedLLM(["<draft_response>x</draft_response>", "no markers at all"])
    r3 = evaluate(ifbench_seed(), [EXAMPLE], bench.metric, llm3).results[0]
    assert r3.score == 0 and r3.error_kind == "parse"
