"""The optimize loop on scripted models with a fake evaluator (no GPU): verdicts, acceptance, budgets,
resume after a kill, the deferred round trip."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from triforge.astra.agents import Deferred, KernelOptimizeSettings, Optimizer
from triforge.astra.agents.evaluator import evaluate_waiting, waiting_jobs
from triforge.astra.task import get_task, shape_label
from triforge.core.budget import BudgetLimits
from triforge.testing.scripted import ScriptedLLM, call

TASK = get_task("silu_and_mul")
BASE = TASK.baseline_source()


def kernel(marker: str) -> str:
    """The baseline with a marker the fake evaluator reads: `FAKE <verdict> x<speedup>`."""
    return f"// FAKE {marker}\n" + BASE


class FakeLab:
    """Answers as the lab would: verdicts and timings in the lab's result shape, from the kernel's marker."""

    def __init__(self, aa: float = 0.002) -> None:
        self.calls: list[str] = []
        self.jobs: dict[str, Any] = {}
        self.aa = aa

    def evaluate(self, jobs, run_dir: Path) -> dict[str, dict[str, Any]]:
        out = {}
        for j in jobs:
            self.calls.append(j.id)
            self.jobs[j.id] = j
            m = re.search(r"FAKE (\w+)(?: x([\d.]+))?", j.source)
            kind, sp = (m.group(1), float(m.group(2) or 1.0)) if m else ("correct", 1.0)
            if j.time_heldout and "heldout_x" in j.source:
                sp = float(re.search(r"heldout_x([\d.]+)", j.source).group(1))
            if kind != "correct":
                out[j.id] = {"verdict": kind, "reasons": [f"planted {kind}"], "timings": []}
                continue
            shapes = TASK.heldout if j.time_heldout else TASK.timing
            rows = [{"shape": shape_label(s), "baseline_us": 100.0, "candidate_us": 100.0 / sp, "speedup": sp,
                     "aa_spread": self.aa, "speedup_real": abs(sp - 1) > 3 * self.aa, "min_bytes": TASK.min_bytes(s, "bf16"),
                     "candidate_gbs": TASK.min_bytes(s, "bf16") / (100e-6 / sp) / 1e9} for s in shapes]
            res = {"verdict": "correct", "reasons": [], "timings": rows, "copy_gbs": 4000.0, "seed": 1}
            if j.bench:
                res["bench"] = {"rows": [{"shape": r["shape"], "comparator": c, "median_us": us, "copy_fraction": 0.5,
                                          "speedup_vs_baseline": 100.0 / us, "verified": "ok"}
                                         for r in rows[:1] for c, us in (("baseline", 100.0), ("candidate", 100.0 / sp),
                                                                         ("torch eager", 150.0))],
                                "copy_gbs": 4000.0, "notes": ["flashinfer: not installed"], "device": "fake"}
            if j.profile:
                res["profile"] = {"shape": "t", "digest": "DRAM throughput 40% of peak"}
            out[j.id] = res
        return out

    def close(self) -> None:
        pass


PLAN = {"title": "p", "change": "c", "predicted_effect": "e"}


def plans(n: int) -> dict:
    return call("submit_plans", plans=[{**PLAN, "title": f"plan {i}"} for i in range(n)])


def models(coding: list, testing=None, profiling=None, planning=None) -> dict[str, ScriptedLLM]:
    return {
        "testing": ScriptedLLM(testing if testing is not None else [
            call("add_test_shape", shape={"num_tokens": 3, "d": 4099}, why="odd d"), call("finish_tests", summary="odd")]),
        "profiling": ScriptedLLM(profiling if profiling is not None else [
            call("timings"), call("submit_analysis", analysis="memory bound at 40% of copy bandwidth")]),
        "planning": ScriptedLLM(planning if planning is not None else [plans(len(coding))]),
        "coding": ScriptedLLM(coding),
    }


def settings(**kw) -> KernelOptimizeSettings:
    base = dict(task="silu_and_mul", start_source=BASE, rounds=1, candidates=5, repairs=0,
                models={"testing": "s", "profiling": "s", "planning": "s", "coding": "s"})
    return KernelOptimizeSettings(**{**base, **kw})


def results(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


def test_round_accepts_only_the_correct_faster_candidate(tmp_path):
    coding = [call("submit_kernel", code=kernel(m)) for m in
              ("correct x1.30", "incorrect", "hack", "correct x1.001", "crash")]
    ms = models(coding)
    lab = FakeLab()
    out = Optimizer(settings(), ms, lab, tmp_path).run()
    assert out.status == "done" and out.best_id == "r1-k0"
    assert out.best_gain == pytest.approx(1.30)
    res = results(tmp_path)
    dec = {cid: c.get("decision", {}) for cid, c in res["candidates"].items()}
    assert dec["r1-k0"]["accepted"] is True
    assert [dec[f"r1-k{i}"]["accepted"] for i in range(1, 5)] == [False] * 4
    assert dec["r1-k1"]["reason"].startswith("incorrect")
    assert dec["r1-k2"]["reason"].startswith("hack")
    assert "not faster" in dec["r1-k3"]["reason"]
    assert dec["r1-k4"]["reason"].startswith("crash")
    # the testing agent's shape is part of every later candidate's check, never of the start's
    assert lab.jobs["r0-start"].extra_shapes == []
    assert lab.jobs["r1-k3"].extra_shapes == [{"num_tokens": 3, "d": 4099}]
    # final check: winner and start on held-out shapes, comparators from the winner's bench
    assert {"final-r1-k0", "final-start"} <= set(lab.calls)
    assert lab.jobs["final-r1-k0"].time_heldout and lab.jobs["final-r1-k0"].bench
    assert res["final"]["verdict"] == "correct" and res["final"]["slower_than_start_on"] == []
    assert res["lineage"] == ["r0-start", "r1-k0"]
    for cid in ("r1-k0", "r1-k4"):
        d = tmp_path / "candidates" / cid
        assert (d / "kernel.cu").read_text().startswith("// FAKE") and (d / "result.json").is_file()
    html = (tmp_path / "report.html").read_text()
    assert "<svg" in html and "r1-k2" in html and "flashinfer: not installed" in html
    assert "r1-k0" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "trace.jsonl").is_file() and (tmp_path / "agents" / "r1-coding-k0.trajectory.json").is_file()
    for m in ms.values():
        m.assert_done()


def test_the_coding_agent_is_told_a_static_hack_and_the_lab_reasons_for_a_repair(tmp_path):
    hack = BASE.replace("const long long token", "long long t0 = clock64();\n  const long long token")
    coding = [call("submit_kernel", code=hack), call("submit_kernel", code=kernel("incorrect")),
              call("submit_kernel", code=kernel("correct x1.2"))]
    ms = models(coding, planning=[plans(1)])
    out = Optimizer(settings(candidates=1, repairs=1), ms, FakeLab(), tmp_path).run()
    assert out.best_id == "r1-k0-fix1"
    told = ms["coding"].requests[1]["messages"][-1]["content"]
    assert "event-or-timer" in told  # the static scan's rule, before any GPU time
    repair_prompt = ms["coding"].requests[2]["messages"][1]["content"]
    assert "planted incorrect" in repair_prompt and "FAKE incorrect" in repair_prompt
    assert results(tmp_path)["candidates"]["r1-k0-fix1"]["parent"] == "r1-k0"


def test_a_winner_slower_than_the_start_on_a_heldout_shape_is_reported(tmp_path):
    coding = [call("submit_kernel", code=kernel("correct x1.3") + "// heldout_x0.9\n")]
    Optimizer(settings(candidates=1), models(coding, planning=[plans(1)]), FakeLab(), tmp_path).run()
    final = results(tmp_path)["final"]
    assert final["slower_than_start_on"] and any("slower than the start" in n for n in final["notes"])


def test_llm_call_budget_stops_without_overshoot(tmp_path):
    coding = [call("submit_kernel", code=kernel("correct x1.3"))]
    ms = models(coding, planning=[plans(1)])
    out = Optimizer(settings(candidates=1, rounds=3), ms, FakeLab(), tmp_path, BudgetLimits(max_calls=2)).run()
    assert out.stopped and "calls" in out.stopped
    assert sum(len(m.requests) for m in ms.values()) == 2
    assert results(tmp_path)["spend"]["calls"] == 2
    assert results(tmp_path)["final"]["verdict"] == "correct"  # the final check still runs


def test_evaluation_budget_cuts_the_batch_and_keeps_the_final_check(tmp_path):
    coding = [call("submit_kernel", code=kernel(f"correct x1.{i + 1}")) for i in range(5)]
    lab = FakeLab()
    out = Optimizer(settings(), models(coding), lab, tmp_path, BudgetLimits(max_evaluations=4)).run()
    assert len(lab.calls) == 4  # start, one candidate, the final check of the winner and of the start
    assert out.best_id == "r1-k0"
    res = results(tmp_path)
    assert [res["candidates"][f"r1-k{i}"]["status"] for i in range(1, 5)] == ["skipped"] * 4
    assert res["spend"]["evaluations"] == 4


class Killed(BaseException):
    pass


def test_resume_after_a_kill_asks_no_model_twice_and_evaluates_nothing_twice(tmp_path):
    def die(messages, tools):
        raise Killed()

    first = models([call("submit_kernel", code=kernel("correct x1.1")), die], planning=[plans(2)])
    lab = FakeLab()
    with pytest.raises(Killed):
        Optimizer(settings(candidates=2), first, lab, tmp_path).run()
    assert lab.calls == ["r0-start"]
    again = models([call("submit_kernel", code=kernel("correct x1.4"))], testing=[], profiling=[], planning=[])
    lab2 = FakeLab()
    out = Optimizer(settings(candidates=2), again, lab2, tmp_path).run()
    assert "r0-start" not in lab2.calls and out.best_id == "r1-k1"
    for m in again.values():
        m.assert_done()


def test_a_different_run_in_the_same_directory_is_refused(tmp_path):
    Optimizer(settings(candidates=1), models([call("submit_kernel", code=kernel("x"))], planning=[plans(1)]),
              FakeLab(), tmp_path).run()
    from triforge.core.errors import UserError

    with pytest.raises(UserError, match="candidates was 1, now 2"):
        Optimizer(settings(candidates=2), models([]), FakeLab(), tmp_path)


def test_evaluate_later_round_trip(tmp_path):
    def run(ms):
        return Optimizer(settings(candidates=2), ms, Deferred(), tmp_path).run()

    out = run(models([], testing=[], profiling=[], planning=[]))
    assert out.status == "waiting" and out.waiting == ["r0-start"]
    assert (tmp_path / "candidates" / "r0-start" / "kernel.cu").read_text() == BASE
    assert [j.id for j in waiting_jobs(tmp_path)] == ["r0-start"]
    assert evaluate_waiting(tmp_path, FakeLab()) == 1
    ms = models([call("submit_kernel", code=kernel("correct x1.2")), call("submit_kernel", code=kernel("incorrect"))])
    out = run(ms)
    assert out.status == "waiting" and out.waiting == ["r1-k0", "r1-k1"]
    assert evaluate_waiting(tmp_path, FakeLab()) == 2
    out = run(models([], testing=[], profiling=[], planning=[]))
    assert out.status == "waiting" and out.waiting == ["final-r1-k0", "final-start"]
    assert evaluate_waiting(tmp_path, FakeLab()) == 2
    out = run(models([], testing=[], profiling=[], planning=[]))
    assert out.status == "done" and out.best_id == "r1-k0"
    assert json.loads((tmp_path / "candidates" / "r1-k1" / "result.json").read_text())["verdict"] == "incorrect"


def test_single_agent_mode(tmp_path):
    ms = {"single": ScriptedLLM([call("submit_candidates", candidates=[
        {**PLAN, "source": kernel("correct x1.25")}, {**PLAN, "title": "other", "source": kernel("correct x1.1")}])])}
    out = Optimizer(settings(single_agent=True, candidates=2, models={"single": "s"}), ms, FakeLab(), tmp_path).run()
    assert out.best_id == "r1-k0" and out.best_gain == pytest.approx(1.25)


def test_an_incorrect_start_kernel_is_a_clear_error(tmp_path):
    from triforge.core.errors import UserError

    with pytest.raises(UserError, match="start kernel is not correct"):
        Optimizer(settings(start_source=kernel("incorrect")), models([]), FakeLab(), tmp_path).run()


def test_usd_budget_stops_the_run_and_is_charged_once_across_a_resume(tmp_path):
    def priced(script):
        return ScriptedLLM(script, price_in_per_mtok=1_000_000.0, price_out_per_mtok=0.0)  # $10 per 10-token call

    ms = {"testing": priced([call("finish_tests", summary="none")]),
          "profiling": priced([call("submit_analysis", analysis="x")]),
          "planning": priced([plans(1)]), "coding": priced([call("submit_kernel", code=kernel("correct x1.3"))])}
    limits = BudgetLimits(max_usd=25.0)
    out = Optimizer(settings(candidates=1, rounds=2), ms, FakeLab(), tmp_path, limits).run()
    assert out.stopped and "USD" in out.stopped
    assert sum(len(m.requests) for m in ms.values()) == 3  # $30 > $25: the fourth call is never sent
    again = {r: priced([]) for r in ms}
    out = Optimizer(settings(candidates=1, rounds=2), again, FakeLab(), tmp_path, limits).run()
    assert out.stopped and sum(len(m.requests) for m in again.values()) == 0
    assert results(tmp_path)["spend"]["usd"] == pytest.approx(30.0)


def test_a_kill_during_evaluation_re_evaluates_without_charging_twice(tmp_path):
    class DiesOnce(FakeLab):
        def evaluate(self, jobs, run_dir):
            if any(j.id.startswith("r1-") for j in jobs):
                raise Killed()
            return super().evaluate(jobs, run_dir)

    coding = [call("submit_kernel", code=kernel("correct x1.3"))]
    with pytest.raises(Killed):
        Optimizer(settings(candidates=1), models(coding, planning=[plans(1)]), DiesOnce(), tmp_path,
                  BudgetLimits(max_evaluations=4)).run()
    lab = FakeLab()
    out = Optimizer(settings(candidates=1), models([], testing=[], profiling=[], planning=[]), lab, tmp_path,
                    BudgetLimits(max_evaluations=4)).run()
    assert lab.calls[0] == "r1-k0" and out.best_id == "r1-k0"
    assert results(tmp_path)["spend"]["evaluations"] == 4


def test_a_spent_model_budget_still_lets_a_deferred_round_finish(tmp_path):
    """The budget ran out exactly when round 1's candidates were handed in: the resume evaluates and decides them."""
    limits = BudgetLimits(max_calls=4)
    run = lambda ms, ev: Optimizer(settings(candidates=1, rounds=2), ms, ev, tmp_path, limits).run()  # noqa: E731
    empty = lambda: models([], testing=[], profiling=[], planning=[])  # noqa: E731
    run(empty(), Deferred())
    evaluate_waiting(tmp_path, FakeLab())
    out = run(models([call("submit_kernel", code=kernel("correct x1.3"))], testing=[call("finish_tests")],
                     planning=[plans(1)], profiling=[call("submit_analysis", analysis="x")]), Deferred())
    assert out.waiting == ["r1-k0"]
    evaluate_waiting(tmp_path, FakeLab())
    out = run(empty(), Deferred())
    assert out.waiting == ["final-r1-k0", "final-start"]
    evaluate_waiting(tmp_path, FakeLab())
    out = run(empty(), Deferred())
    assert out.status == "done" and out.best_id == "r1-k0" and "calls" in out.stopped


def test_a_model_without_native_tools_hands_in_a_kernel_as_a_fenced_block(tmp_path):
    """Small local models write code in fences far more reliably than inside JSON."""
    fence = "```"
    reply = f"Here is the kernel.\n{fence}submit_kernel\n{kernel('correct x1.4')}{fence}\n"
    ms = models([], planning=[plans(1)])
    ms["coding"] = ScriptedLLM([reply], native_tools=False)
    out = Optimizer(settings(candidates=1), ms, FakeLab(), tmp_path).run()
    assert out.best_id == "r1-k0"
    prompt = ms["coding"].requests[0]["messages"][1]["content"]
    assert "fenced as ```submit_kernel" in prompt
    assert (tmp_path / "candidates" / "r1-k0" / "kernel.cu").read_text().startswith("// FAKE correct x1.4")


def test_single_agent_repairs_with_its_own_model(tmp_path):
    ms = {"single": ScriptedLLM([call("submit_candidates", candidates=[{**PLAN, "source": kernel("incorrect")}]),
                                 call("submit_kernel", code=kernel("correct x1.2"))])}
    out = Optimizer(settings(single_agent=True, candidates=1, repairs=1, models={"single": "s"}), ms, FakeLab(),
                    tmp_path).run()
    assert out.best_id == "r1-k0-fix1"
    ms["single"].assert_done()


def _isolation_events(run: Path) -> list[dict]:
    spans = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines() if line.strip()]
    return [s for s in spans if s.get("kind") == "isolation"]


def test_the_trace_records_what_confined_the_candidates(tmp_path):
    class ConfinedLab(FakeLab):
        isolation = "user+net+pid+mount namespaces, seccomp"

    Optimizer(settings(), models([call("submit_kernel", code=kernel("correct x1.2"))]), ConfinedLab(),
              tmp_path / "here").run()
    (ev,) = _isolation_events(tmp_path / "here")
    assert ev["attributes"]["triforge.isolation.held"] == ConfinedLab.isolation
    from triforge.ui.trace_view import isolation_held

    assert isolation_held(tmp_path / "here") == [ConfinedLab.isolation]
    # deferred: the record says where the candidates go and that each result names what held there
    Optimizer(settings(), models([]), Deferred(), tmp_path / "later").run()
    (ev,) = _isolation_events(tmp_path / "later")
    assert ev["attributes"]["triforge.isolation.held"].startswith("deferred")


def test_each_result_names_the_confinement_it_ran_under(tmp_path):
    from triforge.astra.agents.evaluator import EvalJob, run_job
    from triforge.confine.isolation import IsolationPolicy

    class Worker:
        policy = IsolationPolicy(enabled=False)
        visible_devices = "3"

    def fake_check(*a, **k):
        raise RuntimeError("no GPU here")

    import triforge.astra.lab as lab

    orig, lab.check = lab.check, fake_check
    try:
        res = run_job(EvalJob("x", "silu_and_mul", BASE), Worker(), tmp_path)
    finally:
        lab.check = orig
    assert res["verdict"] == "crash" and res["gpu"] == "3"
    assert res["isolation"] == "NOT isolated (turned off)"


@pytest.mark.parametrize("profile,best", [("small-model", "r1-k0"), ("default", "r0-start")])
def test_the_small_model_profile_reads_a_planners_bare_arguments_and_the_default_does_not(tmp_path, profile, best):
    """Seen from Qwen2.5-Coder-1.5B: the plans handed in as a ```json block without the call around them."""
    bare = "My plans:\n```json\n" + json.dumps({"plans": [{**PLAN, "title": "vectorize"}]}) + "\n```"
    ms = models([call("submit_kernel", code=kernel("correct x1.3"))] if profile == "small-model" else [],
                planning=[bare] * (1 if profile == "small-model" else 3))
    ms["planning"] = ScriptedLLM(ms["planning"].script, native_tools=False)
    out = Optimizer(settings(candidates=1, model_profile=profile), ms, FakeLab(), tmp_path).run()
    assert out.best_id == best
    for m in ms.values():
        m.assert_done()
