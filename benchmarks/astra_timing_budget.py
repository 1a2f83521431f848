"""Where the timing part of `astra check` goes, and whether the lab's L2 flush leaves the L2 cold (GPU).

    python benchmarks/astra_timing_budget.py --out FILE.json [--evals 3] [--flush-only]

1. The flush: a 24 MB tensor the L2 holds is read right after each kind of flush (none; the lab's; a
   512 MB write-then-read, the lab's flush before 2026-12-07; a 2 GiB write-then-read as the "surely
   cold" yardstick), clean and after being written (dirty lines), interleaved, median of 60. A flush
   works when the read takes as long as after the yardstick. Also each flush's own time.
2. One timing round's parts on silu_and_mul's timing shapes (making inputs, poisoning the output, the
   flush, the candidate's call, checking its output), synchronised, median of 30.
3. The whole `evaluate` of the corpus's vectorised silu_and_mul, in process, `--evals` times: oracle and
   timing seconds and each shape's A/A spread.

Runs against whichever triforge is first on PYTHONPATH, so the same file measures an older tree too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def flush_study(torch, l2: int, reps: int = 60) -> dict:
    from triforge.astra.timing import L2Flush

    lab = L2Flush()
    lab_bytes = lab.buf.numel() * 4
    old = torch.zeros((512 << 20) // 4, dtype=torch.float32, device="cuda")
    big = torch.zeros((2 << 30) // 4, dtype=torch.float32, device="cuda")

    def wr(buf):
        def f():
            buf.zero_()
            buf.sum()
        return f

    variants = {"none": lambda: None, f"lab ({lab_bytes >> 20} MB)": lab, "512 MB write+read": wr(old),
                "2 GiB write+read": wr(big)}
    hot = torch.randn((24 << 20) // 4, device="cuda")
    out: dict = {"l2_bytes": l2, "lab_flush_bytes": lab_bytes, "hot_bytes": hot.numel() * 4, "busy_before_read": True,
                 "read_us": {}, "dirty_read_us": {}, "flush_us": {}}
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    for dirty in (False, True):
        times: dict[str, list[float]] = {k: [] for k in variants}
        costs: dict[str, list[float]] = {k: [] for k in variants}
        for r in range(reps + 5):
            for name, fl in variants.items():
                hot.add_(1.0) if dirty else hot.sum()
                f0, f1, s, e = ev(), ev(), ev(), ev()
                f0.record()
                fl()
                f1.record()
                # the GPU busy for ~50 us, so the timed read is queued before the start event runs (otherwise
                # an idle GPU counts the host's launch latency: the "none" row would read slow for that alone)
                torch.cuda._sleep(100_000)
                s.record()
                hot.sum()
                e.record()
                torch.cuda.synchronize()
                if r >= 5:
                    times[name].append(s.elapsed_time(e) * 1000)
                    costs[name].append(f0.elapsed_time(f1) * 1000)
        key = "dirty_read_us" if dirty else "read_us"
        out[key] = {k: statistics.median(v) for k, v in times.items()}
        if not dirty:
            out["flush_us"] = {k: statistics.median(v) for k, v in costs.items()}
    del old, big
    torch.cuda.empty_cache()
    return out


def round_parts(torch, reps: int = 30) -> list[dict]:
    from triforge.astra.candidate import Candidate
    from triforge.astra.corpus.holes.outside_view import cases
    from triforge.astra.evaluate import _compile_load
    from triforge.astra.task import get_task, shape_label
    from triforge.astra.tensor_bits import poison
    from triforge.astra.timed_checks import violations
    from triforge.astra.timing import L2Flush

    vec = next(c for c in cases() if c.name == "vectorised-with-a-scalar-tail")
    task = get_task(vec.task)
    _, kern = _compile_load(task, Candidate.from_source(vec.source), False)
    flush = L2Flush()
    rows = []
    for shape in task.timing:
        fn = kern.launcher(shape, "bf16")
        x = task.make_inputs(shape, "bf16", 1)
        fn(x)
        want = x["out"].clone()

        def timed(f) -> float:
            ts = []
            for _ in range(reps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                f()
                torch.cuda.synchronize()
                ts.append((time.perf_counter() - t0) * 1e6)
            return statistics.median(ts)

        rows.append({"shape": shape_label(shape),
                     "make_inputs_us": timed(lambda shape=shape: task.make_inputs(shape, "bf16", 5)),
                     "poison_us": timed(lambda x=x: poison(x["out"])),
                     "flush_us": timed(flush),
                     "call_us": timed(lambda fn=fn, x=x: fn(x)),
                     "check_us": timed(lambda x=x, want=want: violations(task, "out", x["out"], want, "bf16"))})
    return rows


def evals(n: int) -> list[dict]:
    from triforge.astra.corpus.holes.outside_view import cases
    from triforge.astra.evaluate import EvalOptions, evaluate

    vec = next(c for c in cases() if c.name == "vectorised-with-a-scalar-tail")
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        v = evaluate(vec.task, vec.source, EvalOptions())
        out.append({"verdict": v.verdict, "wall_s": time.perf_counter() - t0, "oracle_s": v.oracle_s,
                    "timing_s": v.timing_s, "aa": [t["aa_spread"] for t in v.timings],
                    "speedup": [t["speedup"] for t in v.timings], "candidate_us": [t["candidate_us"] for t in v.timings],
                    "roof": [t.get("roofline_fraction") for t in v.timings], "reasons": v.reasons[:3]})
        print(f"evaluate: {out[-1]['verdict']} timing {v.timing_s:.2f} s oracle {v.oracle_s:.2f} s "
              f"A/A {[f'{100 * a:.1f}%' for a in out[-1]['aa']]}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--evals", type=int, default=3)
    ap.add_argument("--flush-only", action="store_true", help="only part 1")
    args = ap.parse_args()
    import torch

    import triforge
    from triforge.astra.gpu import device_attribute

    res: dict = {"device": torch.cuda.get_device_name(), "tree": str(Path(triforge.__file__).parents[1])}
    res["flush"] = flush_study(torch, device_attribute("L2_CACHE_SIZE"))
    print(json.dumps(res["flush"], indent=1), flush=True)
    if args.flush_only:
        Path(args.out).write_text(json.dumps(res, indent=2))
        return 0
    res["round_parts"] = round_parts(torch)
    for r in res["round_parts"]:
        print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()), flush=True)
    res["evals"] = evals(args.evals)
    Path(args.out).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
