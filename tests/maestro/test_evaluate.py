"""Data-set evaluation: parallel equals serial, planted failures score 0, caching by (hash, id, sample)."""

from __future__ import annotations

import json
import threading
import time

from triforge.core import context
from triforge.core.config import ModelConfig
from triforge.core.llm import OpenAICompatLLM
from triforge.maestro.benchmarks.base import Example, MetricResult
from triforge.maestro.evaluate import ResultStore, evaluate
from triforge.maestro.placeholder_replies import reply_for
from triforge.maestro.program import ProgramBuilder
from triforge.testing.fake_server import FakeOpenAIServer
from triforge.testing.scripted import ScriptedLLM


def program():
    b = ProgramBuilder("echo", inputs=["question"], outputs=["answer"])
    b.llm("draft", inputs=["question"], outputs=["draft"], instruction="Draft.")
    b.llm("answer", inputs=["question", "draft"], outputs=["answer"], instruction="Answer.")
    return b.build()


def examples(n: int, planted: set[int] = frozenset()) -> list[Example]:
    return [Example(f"ex{i}", {"question": f"PLANT {i}" if i in planted else f"question {i}"},
                    {"answer": "fake answer" if i % 2 == 0 else "other"}) for i in range(n)]


def metric(example: Example, run) -> MetricResult:
    ok = run.outputs["answer"] == example.gold["answer"]
    return MetricResult(float(ok), "right" if ok else f"expected {example.gold['answer']!r}")


def server_reply(body):
    user = body["messages"][-1]["content"]
    return "garbage, not fields" if "PLANT" in user else reply_for(body["messages"])


def llm_for(srv: FakeOpenAIServer, cap: int = 16) -> OpenAICompatLLM:
    return OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url, max_concurrency=cap,
                                               timeout_s=10, max_retries=0))


def test_parallel_equals_serial_and_planted_failures_score_zero():
    exs = examples(12, planted={3, 8})
    with FakeOpenAIServer(server_reply, delay_s=0.02) as srv:
        llm = llm_for(srv)
        serial = evaluate(program(), exs, metric, llm, jobs=1)
        parallel = evaluate(program(), exs, metric, llm, jobs=8)
    strip = lambda rep: [{**r.to_dict(), "duration_s": 0, "trace": [{**t, "duration_s": 0} for t in r.trace]}  # noqa: E731
                         for r in rep.results]
    assert strip(serial) == strip(parallel)
    assert [r.example_id for r in parallel.results] == [e.id for e in exs]
    bad = {r.example_id: r for r in parallel.results if r.error}
    assert set(bad) == {"ex3", "ex8"}
    for r in bad.values():
        assert r.score == 0 and r.error_kind == "parse" and "lacks output field" in r.feedback
        assert r.trace[-1]["llm_calls"][0]["reply"] == "garbage, not fields"
    good = [r for r in parallel.results if not r.error]
    assert [r.score for r in good] == [1.0 if int(r.example_id[2:]) % 2 == 0 else 0.0 for r in good]
    assert parallel.errors == {"parse": 2}
    assert parallel.mean_score == sum(r.score for r in good) / 12


def test_parallel_is_faster_and_respects_the_endpoint_cap():
    in_flight, peak, lock = [0], [0], threading.Lock()

    def slow(body):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return reply_for(body["messages"])

    with FakeOpenAIServer(slow) as srv:
        t0 = time.perf_counter()
        rep = evaluate(program(), examples(16), metric, llm_for(srv, cap=4), jobs=16)
        wall = time.perf_counter() - t0
    assert not rep.errors and peak[0] == 4  # 16 workers, but only 4 calls in flight to this endpoint
    assert wall < 32 * 0.05 * 0.6  # well under the serial time of 32 calls


def test_results_are_cached_by_program_hash_example_and_sample(tmp_path):
    store = ResultStore(tmp_path / "results.jsonl")
    calls = []

    def reply(messages, tools):
        calls.append(1)
        return reply_for(messages)

    prog, exs = program(), examples(3)
    first = evaluate(prog, exs, metric, ScriptedLLM([reply] * 12), samples=2, store=store, jobs=2)
    assert len(calls) == 12 and len(store) == 6 and not any(r.cached for r in first.results)
    again = evaluate(prog, exs, metric, ScriptedLLM([]), samples=2, store=ResultStore(tmp_path / "results.jsonl"))
    assert all(r.cached for r in again.results)  # a fresh store re-read the file: nothing re-run
    assert [r.score for r in again.results] == [r.score for r in first.results]
    changed = prog.copy()
    changed.node("answer").instruction = "Answer tersely."  # type: ignore[attr-defined]
    llm = ScriptedLLM([reply] * 6)
    third = evaluate(changed, exs, metric, llm, store=store)
    assert not any(r.cached for r in third.results) and llm.remaining == 0


def test_sample_index_reaches_the_model():
    samples_seen = []

    class Recorder(ScriptedLLM):
        def complete(self, messages, **kw):
            samples_seen.append(kw["sample"])
            return super().complete(messages, **kw)

    evaluate(program(), examples(1), metric, Recorder([lambda m, t: reply_for(m)] * 6), samples=3, jobs=1)
    assert sorted(samples_seen) == [0, 0, 1, 1, 2, 2]


def test_endpoint_failures_are_recorded_and_not_cached(tmp_path):
    store = ResultStore(tmp_path / "r.jsonl")
    with FakeOpenAIServer([{"fault": "500"}] * 4) as srv:
        rep = evaluate(program(), examples(2), metric, llm_for(srv), store=store, jobs=2)
    assert [r.error_kind for r in rep.results] == ["endpoint", "endpoint"]
    assert all(r.score == 0 for r in rep.results) and len(store) == 0


def test_a_metric_that_raises_scores_zero_with_the_reason():
    def broken(example, run):
        raise KeyError("gold")

    rep = evaluate(program(), examples(1), broken, ScriptedLLM([lambda m, t: reply_for(m)] * 2))
    r = rep.results[0]
    assert r.score == 0 and r.error_kind == "metric" and "KeyError" in r.feedback


def test_installs_endpoint_limits_only_when_none_is_given():
    seen = []

    def probe(messages, tools):
        seen.append(context.endpoint_limits())
        return reply_for(messages)

    evaluate(program(), examples(1), metric, ScriptedLLM([probe] * 2))
    assert seen[0] is not None
    mine = context.EndpointLimits()
    with context.use(limits=mine):
        evaluate(program(), examples(1), metric, ScriptedLLM([probe] * 2))
    assert seen[-1] is mine
    json.dumps([r.to_dict() for r in evaluate(program(), examples(1), metric,
                                               ScriptedLLM([probe] * 2)).results])
