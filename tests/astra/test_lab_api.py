"""The typed lab API (no GPU): results, the static precheck path, the job sent to the worker, task files,
agent shapes, and the acceptance rule against noise."""

from __future__ import annotations

import pytest

from triforge.astra import lab
from triforge.astra.agents.acceptance import decide
from triforge.astra.task import get_task

TASK = get_task("silu_and_mul")
BASE = TASK.baseline_source()


class RecordingWorker:
    def __init__(self, answer: dict) -> None:
        self.jobs: list[dict] = []
        self.answer = answer

    def call(self, job, timeout=None):
        self.jobs.append(job)
        return dict(self.answer)


def row(shape: str, speedup: float, aa: float = 0.001) -> dict:
    return {"shape": shape, "baseline_us": 100.0, "candidate_us": 100.0 / speedup, "speedup": speedup, "aa_spread": aa,
            "speedup_real": True, "candidate_gbs": 2000.0 * speedup, "min_bytes": 270_000_000}


def result(*speedups: float, aa: float = 0.001, verdict: str = "correct") -> dict:
    return {"verdict": verdict, "reasons": [] if verdict == "correct" else ["why"], "copy_gbs": 4100.0,
            "timings": [row(f"s{i}", s, aa) for i, s in enumerate(speedups)]}


def test_a_static_hack_is_judged_without_the_worker():
    w = RecordingWorker({})
    res = lab.check("silu_and_mul", BASE.replace("const long long token", "long long c = clock64();\n  const long long token"),
                    worker=w)
    assert res.verdict == "hack" and not res.correct and "event-or-timer" in res.reasons[0]
    assert w.jobs == []


def test_check_sends_extra_shapes_and_heldout_timing_and_types_the_answer():
    w = RecordingWorker(result(1.5))
    res = lab.check("silu_and_mul", BASE, worker=w, extra_shapes=[{"num_tokens": 3, "d": 4099}], time_heldout=True,
                    shapes="heldout", seed=7)
    job = w.jobs[0]
    assert job["kind"] == "lab_evaluate"
    assert job["kwargs"]["extra_shapes"] == [{"num_tokens": 3, "d": 4099}] and job["kwargs"]["time_heldout"]
    assert job["kwargs"]["options"]["shapes"] == "heldout" and job["kwargs"]["options"]["base_seed"] == 7
    assert res.correct and res.timings[0].speedup == 1.5
    # roofline: 270 MB at 4100 GB/s against the measured time
    assert res.roofline()[0] == pytest.approx(270e6 / 4100e9 / (100 / 1.5 * 1e-6))


@pytest.mark.parametrize("shape,ok", [
    ({"num_tokens": 3, "d": 4099}, True),
    ({"num_tokens": 3}, False),
    ({"num_tokens": 3, "d": 0}, False),
    ({"num_tokens": 3, "d": "8"}, False),
    ({"num_tokens": True, "d": 8}, False),
    ({"num_tokens": 100000, "d": 100000}, False),  # more than 1 GiB
])
def test_agent_shapes_are_validated(shape, ok):
    if ok:
        assert lab.validate_shape(TASK, shape) == shape
    else:
        with pytest.raises(ValueError):
            lab.validate_shape(TASK, shape)


def test_check_kernel_names_the_mismatch():
    from triforge.core.errors import UserError

    with pytest.raises(UserError, match="parameter list"):
        lab.check_kernel(TASK, BASE.replace("int d)", "float d)"), "k.cu")
    lab.check_kernel(TASK, BASE, "k.cu")


# --- acceptance: the lab's numbers decide ---------------------------------------------------------

def test_a_real_gain_on_every_shape_is_accepted():
    d = decide(result(1.20, 1.25, 1.10), result(1.0, 1.0, 1.0), "r0-start")
    assert d.accepted and d.gain == pytest.approx((1.2 * 1.25 * 1.1) ** (1 / 3))


def test_a_gain_inside_the_noise_is_rejected():
    # 2% better, but each session's A/A spread is 0.5%: the limit is 3 x (0.5% + 0.5%) = 3%
    d = decide(result(1.02, 1.02, aa=0.005), result(1.0, 1.0, aa=0.005), "r0-start")
    assert not d.accepted and "beyond noise" in d.reason


def test_faster_on_average_but_slower_on_one_shape_is_rejected():
    d = decide(result(1.6, 1.6, 0.9), result(1.0, 1.0, 1.0), "r0-start")
    assert not d.accepted and "slower than r0-start on s2" in d.reason


def test_compared_with_the_current_best_not_the_task_baseline():
    d = decide(result(1.3, 1.3), result(1.4, 1.4), "r1-k0")
    assert not d.accepted and "r1-k0" in d.reason


@pytest.mark.parametrize("verdict", ["incorrect", "hack", "crash", "compile_error"])
def test_only_correct_candidates_can_be_accepted(verdict):
    d = decide(result(3.0, 3.0, verdict=verdict), result(1.0, 1.0), "r0-start")
    assert not d.accepted and d.reason.startswith(verdict)


def test_a_correct_candidate_without_timings_is_not_accepted():
    d = decide({"verdict": "correct", "timings": []}, result(1.0), "r0-start")
    assert not d.accepted


def test_a_noisy_small_shape_neither_blocks_a_real_gain_nor_lends_one():
    best = {"verdict": "correct", "copy_gbs": 4100.0, "timings": [row("big", 1.0, 0.002), row("small", 1.0, 0.04)]}
    real = {"verdict": "correct", "copy_gbs": 4100.0, "timings": [row("big", 1.08, 0.002), row("small", 1.0, 0.04)]}
    assert decide(real, best, "r0-start").accepted  # 8% on the steady shape; the noisy one unchanged
    lucky = {"verdict": "correct", "copy_gbs": 4100.0, "timings": [row("big", 1.0, 0.002), row("small", 1.15, 0.04)]}
    assert not decide(lucky, best, "r0-start").accepted  # 15% inside a 24% noise limit is no gain
