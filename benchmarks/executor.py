"""Executor overhead and scaling: the local pool against Ray on one machine, side by side in one run.

1. Per-task overhead: one no-op task at a time (round trip, p50/p90) and a batch of no-op tasks (wall per
   task), on the local pool and on a local Ray instance (2 CPUs, loopback).
2. Budget round trip: one reservation plus one charge asked of the budget actor from a worker (what every
   LLM call costs on Ray when the run has a budget), and the bytes of trace per LLM span.
   The same pair on the local pool's `Budget` (which reserves too), alone and with 8 threads at once; and a
   task call of `maestro optimize` on Ray: reserve + charge with the search budget hosted in the actor.
3. Scaling: a fake-model `cpagent bench` (the fake server submits each problem's reference model after a
   fixed model delay) with 1 then 2 tasks in flight, on Ray and on the local pool.
4. `maestro optimize` on the simulated bed (in-process task model, so only the search's own cost shows),
   the same search on the local pool and on Ray: wall time and whether the best program is the same.

    .venv/bin/python benchmarks/executor.py [--problems 6] [--delay 0.3] [--out benchmarks/results]

Needs the ray extra; reads the bundled dcp-bench-open. The machine is shared: read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from triforge.core import context
from triforge.core.budget import Budget, BudgetLimits
from triforge.core.config import ModelConfig
from triforge.core.llm import OpenAICompatLLM
from triforge.executors.local import LocalPool
from triforge.testing.fake_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
DATA = "dcp-bench-open"  # the bundled set (triforge.data)


def noop(x: int) -> int:
    return x


def ledger_round_trips(n: int) -> list[float]:
    """Seconds per reserve+charge pair, as a worker sees them (runs on a worker)."""
    b = context.budget()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        b.check()
        b.charge(input_tokens=1, output_tokens=1)
        out.append(time.perf_counter() - t0)
    return out


def search_ledger_round_trips(item: tuple[Any, int]) -> list[float]:
    """Seconds per reserve_call + charge on a hosted search budget (runs on a worker)."""
    ledger, n = item
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        ledger.reserve_call("task")
        ledger.charge(calls=0, input_tokens=1, output_tokens=1)
        out.append(time.perf_counter() - t0)
    return out


def local_budget_pairs(threads: int, n: int) -> list[float]:
    """Seconds per check + charge on the local pool's Budget, `threads` threads at once."""
    b = Budget(BudgetLimits(max_calls=10**9))

    def run(_: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            b.check()
            b.charge(input_tokens=1, output_tokens=1)
            out.append(time.perf_counter() - t0)
        return out

    with context.use(budget=b):
        return [x for xs in LocalPool().map(run, range(threads), jobs=threads) for x in xs]  # type: ignore[union-attr]


def bench_optimize(ex: Any) -> dict[str, Any]:
    from triforge.executors import local as executor_mod
    from triforge.maestro.optimize.runner import Task, optimize
    from triforge.maestro.optimize.state import ProgramOptimizeSettings
    from triforge.maestro.sim_bed import TOOLS, VALIDATORS, SimLM, sim_tasks
    from triforge.maestro.sim_reflection import SimReflection

    t = sim_tasks()[4]
    task = Task("sim", t.program, t.split("train"), t.split("val"), t.split("test"), t.metric, t.retrievers())
    settings = ProgramOptimizeSettings(budget=120, tools=TOOLS, validators=VALIDATORS, patience=30, seed=7)
    with executor_mod.use(ex):
        s = optimize("maestro", task, SimLM(), SimReflection(), settings, None, jobs=2)
    return {"wall_s": s["wall_s"], "best_hash": s["best_hash"], "rollouts": s["spent"]["search_rollouts"] +
            s["spent"]["rollouts"]["test"], "calls": s["spent"]["calls"], "proposals": s["proposals"]}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def overhead(ex: Any, rounds: int, batch: int) -> dict[str, float]:
    ex.map(noop, range(4), jobs=2)  # warm: workers started
    single = []
    for i in range(rounds):
        t0 = time.perf_counter()
        ex.map(noop, [i], jobs=1)
        single.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    ex.map(noop, range(batch), jobs=2)
    wall = time.perf_counter() - t0
    return {"single_p50_ms": 1e3 * statistics.median(single), "single_p90_ms": 1e3 * pct(single, 0.9),
            "batch_per_task_ms": 1e3 * wall / batch, "batch": batch, "rounds": rounds}


def bench_scaling(ex: Any, problems: int, delay: float) -> dict[str, Any]:
    from triforge.cpagent.bench import run_bench
    from triforge.cpagent.dataset import load_dataset
    from triforge.cpagent.reference_replies import reference_submitter
    from triforge.cpagent.task import task_from_problem

    probs = load_dataset(DATA)[:problems]
    tasks = [task_from_problem(p) for p in probs]
    reply = reference_submitter(probs)
    out: dict[str, Any] = {}
    with FakeOpenAIServer(lambda body: {**_step(reply(body)), "delay_s": delay}) as srv:
        llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url, max_retries=0))
        for jobs in (1, 2):
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                s = run_bench(tasks, llm, Path(d) / "run", jobs=jobs, executor=ex)
                out[f"jobs{jobs}_s"] = time.perf_counter() - t0
                out[f"jobs{jobs}_grades"] = s["grades"]
                if jobs == 1:
                    traces = list((Path(d) / "run").rglob("trace.jsonl"))
                    lines = [ln for t in traces for ln in t.read_text().splitlines()]
                    llm_lines = [ln for ln in lines if '"kind": "llm"' in ln]
                    out["trace_bytes_per_llm_span"] = sum(map(len, llm_lines)) / max(1, len(llm_lines))
                    out["llm_spans"] = len(llm_lines)
    out["speedup_1_to_2"] = out["jobs1_s"] / out["jobs2_s"]
    return out


def _step(step: Any) -> dict[str, Any]:
    return {"content": step} if isinstance(step, str) else dict(step)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=6)
    ap.add_argument("--delay", type=float, default=0.3, help="Fake model seconds per reply.")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--batch", type=int, default=400)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    from triforge.executors.ray_executor import RayExecutor

    t_start = time.perf_counter()
    rex = RayExecutor(num_cpus=2)
    start_s = time.perf_counter() - t_start
    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    local = LocalPool()
    res: dict[str, Any] = {"date": "2026-12-04", "machine": f"{os.cpu_count()} cores, shared with other engineers' "
                           "builds and tests while this ran", "load_before": os.getloadavg(),
                           "ray": ray.__version__, "ray_start_s": start_s}
    res["overhead"] = {"local": overhead(local, args.rounds, args.batch), "ray": overhead(rex, args.rounds, args.batch)}
    with context.use(budget=Budget(BudgetLimits(max_calls=10**9))):
        [trips] = rex.map(ledger_round_trips, [200], jobs=1)
    res["ledger_round_trip_ms"] = {"p50": 1e3 * statistics.median(trips), "p90": 1e3 * pct(trips, 0.9)}
    from triforge.maestro.optimize.budget import search_budget

    [strips] = rex.map(search_ledger_round_trips, [(rex.host(search_budget(max_calls=10**9)), 200)], jobs=1)
    res["search_ledger_round_trip_ms"] = {"p50": 1e3 * statistics.median(strips), "p90": 1e3 * pct(strips, 0.9)}
    res["local_budget_pair_us"] = {}
    for threads in (1, 8):
        pairs = local_budget_pairs(threads, 2000)
        res["local_budget_pair_us"][f"threads{threads}"] = {"p50": 1e6 * statistics.median(pairs),
                                                            "p90": 1e6 * pct(pairs, 0.9)}
    res["optimize_sim"] = {"local": bench_optimize(local), "ray": bench_optimize(rex)}
    res["bench_scaling"] = {"problems": args.problems, "model_delay_s": args.delay,
                            "ray": bench_scaling(rex, args.problems, args.delay),
                            "local": bench_scaling(local, args.problems, args.delay)}
    res["load_after"] = os.getloadavg()
    rex.close()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / "executor-2026-12-04"
    stem.with_suffix(".json").write_text(json.dumps(res, indent=1))
    o, sc = res["overhead"], res["bench_scaling"]
    md = ["# Executor overhead and scaling (2026-12-04)", "", f"Machine: {res['machine']}; load before "
          f"{res['load_before'][0]:.1f}, after {res['load_after'][0]:.1f}. Ray {res['ray']} local instance, 2 CPUs, "
          f"started in {start_s:.1f} s.", "", "| | local pool | Ray |", "|---|---|---|"]
    for key, label in (("single_p50_ms", "one task round trip, p50 (ms)"), ("single_p90_ms", "one task, p90 (ms)"),
                       ("batch_per_task_ms", f"batch of {args.batch}, wall per task (ms)")):
        md.append(f"| {label} | {o['local'][key]:.2f} | {o['ray'][key]:.2f} |")
    md += ["", f"Budget reserve + charge from a worker: p50 {res['ledger_round_trip_ms']['p50']:.2f} ms, "
           f"p90 {res['ledger_round_trip_ms']['p90']:.2f} ms. The same with the search budget of `maestro optimize` "
           f"hosted in the actor (reserve_call + charge): p50 {res['search_ledger_round_trip_ms']['p50']:.2f} "
           f"ms, p90 {res['search_ledger_round_trip_ms']['p90']:.2f} ms.", "",
           "Local pool `Budget` check (a reservation) + charge, per call: " + ", ".join(
               f"{k[7:]} thread(s) p50 {v['p50']:.1f} us, p90 {v['p90']:.1f} us"
               for k, v in res["local_budget_pair_us"].items()) + ".", "",
           f"Fake-model cpagent bench, {args.problems} problems, {args.delay} s per model reply:", "",
           "| | 1 in flight (s) | 2 in flight (s) | ratio |", "|---|---|---|---|"]
    for k in ("local", "ray"):
        md.append(f"| {k} | {sc[k]['jobs1_s']:.1f} | {sc[k]['jobs2_s']:.1f} | {sc[k]['speedup_1_to_2']:.2f}x |")
    md += ["", f"Trace: {sc['ray']['trace_bytes_per_llm_span']:.0f} bytes per LLM span on average "
           f"({sc['ray']['llm_spans']} spans).", ""]
    op = res["optimize_sim"]
    md += ["`maestro optimize` on the simulated bed (routing task, budget 120, seed 7, 2 in flight; in-process "
           "task model, so this is the search's own cost):", "", "| | wall (s) | rollouts | task + reflection calls "
           "| proposals |", "|---|---|---|---|---|"]
    for k in ("local", "ray"):
        md.append(f"| {k} | {op[k]['wall_s']:.1f} | {op[k]['rollouts']} | {op[k]['calls']['task']} + "
                  f"{op[k]['calls']['reflection']} | {op[k]['proposals']} |")
    md += ["", f"Same best program on both: {op['local']['best_hash'] == op['ray']['best_hash']}."]
    stem.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
