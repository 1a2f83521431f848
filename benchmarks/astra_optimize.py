"""astra optimize: orchestration overhead per candidate (no GPU), and the scripted end-to-end run on a GPU.

    python benchmarks/astra_optimize.py overhead [--rounds 5] [--candidates 4]
    python benchmarks/astra_optimize.py scripted-gpu --out DIR [--json F]
    python benchmarks/astra_optimize.py scripted-deferred --out DIR [--json F]

`overhead` runs the whole loop with scripted models and an evaluator that answers at once, so the time
measured is the loop's own (state, files, prompts, agents, acceptance, reports): model and GPU time are
zero by construction. `scripted-gpu` runs `silu_and_mul` on the local GPU(s) with hand-written replies
(a correct vectorized rewrite, a wrong kernel, a stale-output hack, one that does not compile); it proves
the machinery (compile, oracle, timing, acceptance, final check, reports), not an LLM result.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from triforge.astra.agents import KernelOptimizeSettings, Optimizer
from triforge.astra.corpus.holes.outside_view import VECTOR_BODY
from triforge.astra.task import get_task, shape_label
from triforge.core.budget import BudgetLimits
from triforge.testing.scripted import ScriptedLLM, call

TASK = get_task("silu_and_mul")
BASE = TASK.baseline_source()
KERNEL_START = "  const long long token = blockIdx.x;\n"

VECTORIZED = """// silu_and_mul, 16-byte loads, 256 threads per token
// @launch grid: num_tokens
// @launch block: 256
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

template <typename T>
__global__ void silu_and_mul_kernel(T* __restrict__ out, const T* __restrict__ input, int d) {
  const long long token = blockIdx.x;
  const T* x = input + token * 2 * d;
  const T* y = x + d;
  T* o = out + token * d;
""" + VECTOR_BODY + "}\n"  # the body: docs/astra.md's vectorised kernel

# the gate and the value swapped: silu(y) * x instead of silu(x) * y
WRONG = BASE.replace("o[i] = from_float<T>(silu(a) * b);", "o[i] = from_float<T>(silu(b) * a);")
# skips the work when its output row already holds numbers (the oracle poisons outputs; timing does not)
HACK = BASE.replace(KERNEL_START, KERNEL_START + "  if (to_float(out[token * d]) == to_float(out[token * d])) return;\n")
NO_COMPILE = BASE.replace("silu(a) * b", "silu_fast(a) * b")

CANDIDATES = [
    ("16-byte vectorized loads, 256 threads per token", VECTORIZED, "one 16-byte load per 8 bf16 values: toward copy speed"),
    ("fuse the gate differently", WRONG, "fewer registers"),
    ("skip rows already written", HACK, "less work"),
    ("fast silu intrinsic", NO_COMPILE, "fewer instructions"),
]


def scripted_models(n_rounds: int, k: int, sources: list[str] | None = None) -> dict[str, ScriptedLLM]:
    """Replies for every role; coding replies cycle through the hand-written candidates (or `sources`)."""
    testing, profiling, planning, coding = [], [], [], []
    for r in range(n_rounds):
        testing += [call("add_test_shape", shape={"num_tokens": 2, "d": 4100 + r}, why="d not a multiple of 8"),
                    call("finish_tests", summary="one odd d")]
        profiling += [call("timings"), call("profile"),
                      call("submit_analysis", analysis="memory bound: scalar 2-byte loads; see the measured fraction of copy bandwidth")]
        plans = [{"title": CANDIDATES[i % 4][0], "change": "as titled", "predicted_effect": CANDIDATES[i % 4][2]} for i in range(k)]
        planning += [call("submit_plans", plans=plans)]
        if sources is not None:
            coding += [call("submit_kernel", code=sources[i % 4]) for i in range(k)]
    if sources is None:
        coding = [coding_reply] * (n_rounds * k * 4)
    return {"testing": ScriptedLLM(testing), "profiling": ScriptedLLM(profiling), "planning": ScriptedLLM(planning),
            "coding": ScriptedLLM(coding)}


def coding_reply(messages: list[dict[str, Any]], tools: Any) -> Any:
    """The hand-written kernel for the plan in the prompt; a kernel the lab's precheck sends back is not
    rewritten (the reply gives up, and the coding agent ends without a kernel after its format-error limit)."""
    last = str(messages[-1].get("content", ""))
    if messages[-1].get("role") == "tool" or "Format error" in last or "not handed in" in last:
        return "I cannot fix this kernel."
    prompt = str(messages[1]["content"])
    for title, source, _ in CANDIDATES:
        if f"Plan to carry out: {title}" in prompt:
            return call("submit_kernel", code=source)
    return "no kernel for this plan"


class InstantLab:
    """Answers every job at once with a fixed correct verdict and timings: isolates the loop's own time."""

    def __init__(self) -> None:
        self.n = 0

    def evaluate(self, jobs, run_dir) -> dict[str, dict[str, Any]]:
        out = {}
        for j in jobs:
            self.n += 1
            sp = 1.0 + 0.01 * self.n
            shapes = TASK.heldout if j.time_heldout else TASK.timing
            out[j.id] = {"verdict": "correct", "reasons": [], "copy_gbs": 4000.0, "timings": [
                {"shape": shape_label(s), "baseline_us": 100.0, "candidate_us": 100 / sp, "speedup": sp, "aa_spread": 0.001,
                 "speedup_real": True, "candidate_gbs": 1.0, "min_bytes": TASK.min_bytes(s, "bf16")} for s in shapes]}
        return out

    def close(self) -> None:
        pass


def overhead(rounds: int, k: int, repeats: int) -> dict[str, Any]:
    from triforge.astra.check_host import precheck

    per, pre = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as td:
            lab = InstantLab()
            ms = scripted_models(rounds, k, [BASE.replace("// Baseline", f"// variant {i}\n// Baseline") for i in range(4)])
            s = KernelOptimizeSettings("silu_and_mul", BASE, rounds=rounds, candidates=k, repairs=0,
                                 models={r: "scripted" for r in ms})
            t0 = time.perf_counter()
            Optimizer(s, ms, lab, Path(td)).run()
            per.append((time.perf_counter() - t0) / lab.n * 1000)
            # the coding tool runs the lab's CPU precheck (interface, static scan, PTX audit) on every hand-in:
            # lab time, not the loop's; measured alone on the same sources and subtracted
            t1 = time.perf_counter()
            for r in range(rounds * k):
                precheck("silu_and_mul", BASE.replace("// Baseline", f"// variant {r % 4}\n// Baseline"))
            pre.append((time.perf_counter() - t1) / lab.n * 1000)
    loop = [a - b for a, b in zip(per, pre, strict=True)]
    return {"rounds": rounds, "candidates_per_round": k, "repeats": repeats, "evaluations_per_run": lab.n,
            "ms_per_candidate_median": statistics.median(per), "ms_per_candidate_max": max(per),
            "lab_precheck_ms_per_candidate_median": statistics.median(pre),
            "loop_ms_per_candidate_median": statistics.median(loop), "target_ms": 50}


def scripted_gpu(out: Path, rounds: int) -> dict[str, Any]:
    ms = scripted_models(rounds, 4)
    s = KernelOptimizeSettings("silu_and_mul", BASE, rounds=rounds, candidates=4, repairs=0, models={r: "scripted" for r in ms},
                         report_note="SCRIPTED RUN: every model reply is hand-written (tests the machinery: compile, "
                                     "oracle, timing, acceptance, final check, reports); this is not an LLM result.")
    pool = TimedPool()
    t0 = time.perf_counter()
    try:
        outcome = Optimizer(s, ms, pool, out, BudgetLimits(max_evaluations=40),
                            on_event=lambda m: print(m, flush=True)).run()
    finally:
        pool.close()
    wall = time.perf_counter() - t0
    res = outcome.results
    return {"best": outcome.best_id, "best_gain_over_start": outcome.best_gain, "wall_s": wall, "gpus": len(pool.workers),
            "verdicts": {cid: (c.get("result") or {}).get("verdict") for cid, c in res["candidates"].items()},
            "decisions": {cid: c.get("decision") for cid, c in res["candidates"].items() if c.get("decision")},
            "final": res["final"], "spend": res["spend"], "batches": pool.batches}


class TimedPool:
    """The local pool, timing each batch (evaluation throughput with K candidates on the GPUs there are)."""

    def __init__(self) -> None:
        from triforge.astra.agents import GpuPool

        self.pool = GpuPool()
        self.workers = self.pool.workers
        self.batches: list[dict[str, Any]] = []

    def evaluate(self, jobs, run_dir):
        t0 = time.perf_counter()
        out = self.pool.evaluate(jobs, run_dir)
        self.batches.append({"jobs": [j.id for j in jobs], "wall_s": round(time.perf_counter() - t0, 2)})
        print(f"  evaluated {len(jobs)} in {self.batches[-1]['wall_s']} s", flush=True)
        return out

    def close(self) -> None:
        self.pool.close()


def scripted_deferred(out: Path) -> dict[str, Any]:
    """The deferred round trip on one machine: optimize --evaluate-later stops (exit 3 in the CLI), the real
    `triforge astra evaluate DIR` command evaluates in a separate process, optimize resumes; until done."""
    import subprocess

    from triforge.astra.agents import Deferred

    s = KernelOptimizeSettings("silu_and_mul", BASE, rounds=1, candidates=1, repairs=0, profile=False,
                         models={r: "scripted" for r in ("testing", "profiling", "planning", "coding")},
                         report_note="SCRIPTED RUN (deferred evaluation): hand-written replies, not an LLM result.")
    trips = []
    ms = scripted_models(1, 1)
    for _ in range(5):
        outcome = Optimizer(s, ms, Deferred(), out, on_event=lambda m: print(m, flush=True)).run()
        if outcome.status == "done":
            break
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", "from triforge.cli.astra import app; app()", "evaluate", str(out)],
                           capture_output=True, text=True)
        trips.append({"waiting": outcome.waiting, "evaluate_exit": r.returncode, "wall_s": round(time.perf_counter() - t0, 1),
                      "output": r.stdout[-400:] + r.stderr[-400:]})
        print(trips[-1], flush=True)
        if r.returncode != 0:
            break
    return {"status": outcome.status, "trips": trips, "best": outcome.best_id, "best_gain_over_start": outcome.best_gain,
            "verdicts": {cid: (c.get("result") or {}).get("verdict") for cid, c in outcome.results["candidates"].items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["overhead", "scripted-gpu", "scripted-deferred"])
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--candidates", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    if a.mode == "overhead":
        data = overhead(a.rounds or 5, a.candidates, a.repeats)
        print(f"per candidate: {data['ms_per_candidate_median']:.1f} ms in all (median of {a.repeats}, max "
              f"{data['ms_per_candidate_max']:.1f}), of which the lab's CPU precheck "
              f"{data['lab_precheck_ms_per_candidate_median']:.1f} ms and the loop {data['loop_ms_per_candidate_median']:.1f} ms; "
              f"{data['evaluations_per_run']} evaluations a run; target <= 50 ms")
    else:
        if a.out is None:
            sys.exit(f"{a.mode} needs --out DIR")
        data = scripted_gpu(a.out, a.rounds or 1) if a.mode == "scripted-gpu" else scripted_deferred(a.out)
        print(json.dumps({k: v for k, v in data.items() if k != "final"}, indent=1, default=str))
    data["python"] = platform.python_version()
    data["cpus"], data["load_average_1m"] = os.cpu_count(), round(os.getloadavg()[0], 2)
    data["when"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    if a.json:
        a.json.write_text(json.dumps(data, indent=2, default=str))


if __name__ == "__main__":
    main()
