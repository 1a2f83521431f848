"""astra on several GPUs of one host: throughput, timing under load, verdicts, placement (issue 24).

    python benchmarks/astra_multi_gpu.py --out DIR [--gpus 1,2,4,8] [--executors local,ray] [--kind LABEL]

For each GPU count G in --gpus (capped at the GPUs visible here) and each executor (astra's own local
pool: one warm lab worker per GPU; Ray: a local instance on 127.0.0.1, one task per candidate asking for
num_gpus=1, each task starting its own lab worker), a fixed set of 16 candidates from the lab's corpus
(one structural rewrite and one planted fault of each of the 8 tasks; no model) is evaluated after a
warm-up: candidates per minute, speedup over G=1, the A/A spread of the timing sessions per GPU, and the
verdicts (they must not depend on G or the executor). Then one candidate (silu_and_mul's 16-byte rewrite)
is timed alone on GPU 0 and again while the other GPUs evaluate candidates, and one scripted
`astra optimize` round (hand-written replies, not an LLM result) runs with K = G candidates, its report
naming the GPU of each. Every source is tagged per pass, so no pass reuses another's compiled kernels.

Writes DIR/astra-multi-gpu.json after every section, DIR/astra-multi-gpu.md at the end, and the scripted
run's report as DIR/optimize-report.md. `--dry-run-gpus N` declares N GPUs on a machine without any (every
verdict is then crash): it checks this script, it measures nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "benchmarks")]

from triforge.astra.agents.evaluator import EvalJob, GpuPool, PinnedWorker, run_job  # noqa: E402
from triforge.astra.corpus.planted.variants import Variant, all_variants  # noqa: E402
from triforge.executors.local import visible_gpus  # noqa: E402

# one structural rewrite (must be correct) and one planted fault (must not be) per task
REWRITES = {"silu_and_mul": "vectorized-16B", "gelu_tanh_and_mul": "vectorized-16B",
            "rmsnorm": "warp-shuffle-reduction", "fused_add_rmsnorm": "warp-shuffle-reduction",
            "merge_attn_states_lse": "warp-per-head", "merge_state": "warp-per-head",
            "rotary_embedding": "one-thread-per-pair", "per_token_group_quant_fp8": "warp-per-group-shuffle"}
FAULTS = {"silu_and_mul": "halves-swapped", "gelu_tanh_and_mul": "wrong-gate-offset", "rmsnorm": "eps-outside-rsqrt",
          "fused_add_rmsnorm": "residual-not-stored", "merge_attn_states_lse": "weights-swapped",
          "merge_state": "weights-swapped", "rotary_embedding": "sin-sign", "per_token_group_quant_fp8": "abs-missing"}
PROBE = ("silu_and_mul", "vectorized-16B")
TIMEOUT = 600.0


def candidate_set() -> list[Variant]:
    want = {(t, n) for t, n in REWRITES.items()} | {(t, n) for t, n in FAULTS.items()}
    out = [v for v in all_variants() if (v.task, v.name) in want]
    assert len(out) == 16, sorted((v.task, v.name) for v in out)
    return out


def cid(v: Variant) -> str:
    return f"{v.task}.{v.name}"


def tagged(v: Variant, tag: str, **kw: Any) -> EvalJob:
    """The candidate as a job; the tag makes the source new to the compile cache."""
    return EvalJob(cid(v), v.task, v.source + f"\n// astra_multi_gpu pass {tag}\n", **kw)


def gpu_inventory() -> list[str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    r = subprocess.run([exe, "--query-gpu=index,name,pci.bus_id,memory.total", "--format=csv,noheader"],
                       capture_output=True, text=True, timeout=60)
    return [line.strip() for line in r.stdout.splitlines() if line.strip()]


def geo_speedup(res: dict[str, Any]) -> float | None:
    sp = [t["speedup"] for t in res.get("timings", []) if t.get("speedup")]
    return math.exp(sum(math.log(s) for s in sp) / len(sp)) if sp else None


def aa_by_gpu(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    by: dict[str, list[float]] = {}
    for r in results.values():
        if r.get("verdict") == "correct":
            by.setdefault(str(r.get("gpu")), []).extend(t["aa_spread"] for t in r.get("timings", []))
    return {g: {"timing_sessions": len(v), "median": statistics.median(v), "max": max(v)} for g, v in sorted(by.items())}


def evaluator_for(kind: str, g: int) -> Any:
    if kind == "local":
        return GpuPool(gpus=g, timeout=TIMEOUT)
    from triforge.astra.agents.executor_pool import ExecutorPool
    from triforge.executors.ray_executor import RayExecutor

    return ExecutorPool(RayExecutor(), width=g, timeout=TIMEOUT)


def throughput(kind: str, g: int, cands: list[Variant], run_dir: Path) -> dict[str, Any]:
    """A warm-up batch of G baseline checks, then the 16 candidates; only the second is timed."""
    from triforge.astra.task import get_task

    ev = evaluator_for(kind, g)
    tag = f"{kind}-{g}"
    try:
        t0 = time.perf_counter()
        warm = [EvalJob(f"warm-{i}", t, get_task(t).baseline_source() + f"\n// warm {tag} {i}\n")
                for i, t in enumerate(list(REWRITES)[:g])]
        ev.evaluate(warm, run_dir)
        warm_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = ev.evaluate([tagged(v, tag) for v in cands], run_dir)
        wall = time.perf_counter() - t0
    finally:
        ev.close()
    return {"executor": kind, "gpus": g, "candidates": len(cands), "warmup_s": round(warm_s, 2), "wall_s": round(wall, 2),
            "candidates_per_min": round(len(cands) / wall * 60, 2),
            "verdicts": {k: r.get("verdict") for k, r in sorted(res.items())},
            "placed_on": {k: r.get("gpu") for k, r in sorted(res.items())},
            "lab_s": {k: round(sum(r.get(f) or 0 for f in ("compile_s", "oracle_s", "timing_s")), 2) for k, r in res.items()},
            "aa_spread_by_gpu": aa_by_gpu(res),
            "reasons_of_unexpected": {k: r.get("reasons", [])[:1] for k, r in res.items()
                                      if (r.get("verdict") == "correct") != (k.split(".")[1] == REWRITES.get(k.split(".")[0]))}}


def per_shape(res: dict[str, Any]) -> dict[str, tuple[float, float]]:
    return {t["shape"]: (t["speedup"], t["aa_spread"]) for t in res.get("timings", [])}


def alone_vs_busy(g: int, cands: list[Variant], reps: int, run_dir: Path) -> dict[str, Any]:
    """The probe candidate timed `reps` times on GPU 0 alone, then `reps` times while GPUs 1..G-1 evaluate
    the candidate set in a loop. Agreement per timing shape: |busy / alone - 1| within 3 x (both A/A spreads)."""
    probe = next(v for v in cands if (v.task, v.name) == PROBE)
    w0 = PinnedWorker(0 if g > 1 else None, TIMEOUT)
    others = [PinnedWorker(i, TIMEOUT) for i in range(1, g)]
    out: dict[str, Any] = {"gpus": g, "candidate": cid(probe), "reps": reps}
    try:
        run_job(tagged(probe, "probe-warm"), w0, run_dir)
        alone = [run_job(tagged(probe, f"alone-{i}"), w0, run_dir) for i in range(reps)]
        out["alone"] = [{"verdict": r["verdict"], "gpu": r.get("gpu"), "geo_speedup": geo_speedup(r), "shapes": per_shape(r)}
                        for r in alone]
        if not others:
            out["busy"] = None
            out["busy_note"] = "not measurable: no other GPU visible to keep busy"
            return out
        stop, done = threading.Event(), [0] * len(others)

        def keep_busy(j: int) -> None:
            k = 0
            while not stop.is_set():
                v = cands[(k + j) % len(cands)]
                run_job(tagged(v, f"load-{j}-{k}"), others[j], run_dir)
                done[j] += 1
                k += 1

        threads = [threading.Thread(target=keep_busy, args=(j,), daemon=True) for j in range(len(others))]
        for t in threads:
            t.start()
        time.sleep(5)  # the load is compiling and checking before the probe starts
        busy = [run_job(tagged(probe, f"busy-{i}"), w0, run_dir) for i in range(reps)]
        stop.set()
        for t in threads:
            t.join(TIMEOUT)
        out["busy"] = [{"verdict": r["verdict"], "gpu": r.get("gpu"), "geo_speedup": geo_speedup(r), "shapes": per_shape(r)}
                       for r in busy]
        out["load_jobs_done_per_gpu"] = done
        out["agreement"] = agreement(out["alone"], out["busy"])
    finally:
        for w in [w0, *others]:
            w.stop()
    return out


def agreement(alone: list[dict[str, Any]], busy: list[dict[str, Any]]) -> dict[str, Any]:
    rows = {}
    for shape in alone[0]["shapes"]:
        a = statistics.median(r["shapes"][shape][0] for r in alone)
        b = statistics.median(r["shapes"][shape][0] for r in busy)
        noise = 3 * (statistics.median(r["shapes"][shape][1] for r in alone)
                     + statistics.median(r["shapes"][shape][1] for r in busy))
        rows[shape] = {"alone": round(a, 4), "busy": round(b, 4), "busy_over_alone": round(b / a, 4),
                       "noise_limit": round(noise, 4), "within_noise": abs(b / a - 1) <= noise}
    return {"shapes": rows, "all_within_noise": all(r["within_noise"] for r in rows.values()) if rows else None}


def scripted_optimize(k: int, run_dir: Path, profile: bool) -> dict[str, Any]:
    import astra_optimize as ao

    from triforge.astra.agents import KernelOptimizeSettings, Optimizer
    from triforge.core.budget import BudgetLimits

    ms = ao.scripted_models(1, k)
    s = KernelOptimizeSettings("silu_and_mul", ao.BASE, rounds=1, candidates=k, repairs=0, profile=profile,
                         models={r: "scripted" for r in ms},
                         report_note=f"SCRIPTED RUN with K = {k} candidates on {k} GPU(s): every model reply is "
                                     "hand-written; this is not an LLM result.")
    pool = GpuPool(gpus=k, timeout=TIMEOUT)
    t0 = time.perf_counter()
    try:
        outcome = Optimizer(s, ms, pool, run_dir, BudgetLimits(max_evaluations=4 * k + 8)).run()
    finally:
        pool.close()
    res = outcome.results
    return {"k": k, "wall_s": round(time.perf_counter() - t0, 1), "best": outcome.best_id,
            "best_gain_over_start": outcome.best_gain, "profile": profile,
            "placement": {c: {"gpu": (r.get("result") or {}).get("gpu"), "verdict": (r.get("result") or {}).get("verdict")}
                          for c, r in sorted(res["candidates"].items())}}


def isolation_preflight() -> str:
    """What confines the lab workers here. Where isolation cannot be held, the run goes on without it (the
    candidates are the lab's own corpus) and says so, instead of refusing every candidate."""
    from triforge.astra.worker import Worker
    from triforge.confine.isolation import IsolationUnavailable

    w = Worker(timeout=120)
    try:
        w.start()
        return w.isolation or "default"
    except IsolationUnavailable as e:
        os.environ["TRIFORGE_ISOLATION"] = "none"
        return f"none (unavailable here: {str(e)[:200]})"
    finally:
        w.stop()


def verdict_identity(passes: list[dict[str, Any]]) -> dict[str, Any]:
    if not passes:
        return {"identical": None}
    ref = passes[0]["verdicts"]
    diff = [{"pass": f"{p['executor']} G={p['gpus']}", "candidate": c, "verdict": p["verdicts"].get(c), "reference": v}
            for p in passes[1:] for c, v in ref.items() if p["verdicts"].get(c) != v]
    return {"identical": not diff, "passes": [f"{p['executor']} G={p['gpus']}" for p in passes], "differences": diff,
            "reference": ref}


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(map(str, r)) + " |" for r in rows]


def write_md(d: dict[str, Any], path: Path) -> None:
    lines = [f"# astra on several GPUs ({d['when']})", ""]
    if d["dry_run"]:
        lines += ["**DRY RUN: GPUs declared, none present; every verdict is crash. Nothing here is a measurement.**", ""]
    lines += [f"- machine: {d['kind'] or '?'}; visible GPUs: {d['visible_gpus']} ({'; '.join(d['gpu_inventory']) or 'none listed'});"
              f" torch {d.get('torch', '-')}; python {d['python']}; {d['cpus']} CPUs; isolation: {d['isolation']}",
              f"- command: `{d['command']}`",
              f"- GPU counts measured: {d['measured_gpu_counts']}; requested but not visible here (not measured): "
              f"{d['not_measured_gpu_counts'] or 'none'}",
              f"- candidates ({len(d['candidates'])}): {', '.join(d['candidates'])}", ""]
    if d["throughput"]:
        lines += ["## Throughput (16 candidates after a warm-up batch)", ""]
        lines += _table(["executor", "GPUs", "wall s", "candidates/min", "speedup over 1 GPU", "target", "warm-up s",
                         "GPUs used"],
                        [[r["executor"], r["gpus"], r["wall_s"], r["candidates_per_min"], r.get("speedup_over_1_gpu"),
                          f">= {r['target_speedup']}", r["warmup_s"], ",".join(sorted(set(map(str, r["placed_on"].values()))))]
                         for r in d["throughput"]])
        lines += ["", "## A/A spread of the timing sessions, per GPU (correct candidates)", ""]
        lines += _table(["executor", "GPUs", "GPU", "timing sessions", "median", "max"],
                        [[r["executor"], r["gpus"], g, x["timing_sessions"], f"{x['median']:.2%}", f"{x['max']:.2%}"]
                         for r in d["throughput"] for g, x in r["aa_spread_by_gpu"].items()])
        v = d.get("verdicts", {})
        lines += ["", f"## Verdicts: identical across {', '.join(v.get('passes', []))}: **{v.get('identical')}**", ""]
        lines += _table(["candidate", "verdict"], [[c, x] for c, x in v.get("reference", {}).items()])
        lines += [f"- differs: {x}" for x in v.get("differences", [])]
    ab = d.get("alone_vs_busy")
    if ab:
        lines += ["", f"## {ab['candidate']} timed alone and with the other GPUs busy (GPU 0, {ab['reps']} runs each)", ""]
        lines += _table(["run", "GPU", "verdict", "speedup vs task baseline (geomean of timing shapes)"],
                        [[f"{kind} {i + 1}", r["gpu"], r["verdict"], f"x{r['geo_speedup']:.3f}" if r["geo_speedup"] else "-"]
                         for kind in ("alone", "busy") for i, r in enumerate(ab.get(kind) or [])])
        if ab.get("busy") is None:
            lines += ["", f"- with the other GPUs busy: {ab['busy_note']}"]
        else:
            lines += ["", f"- load jobs finished on the other GPUs meanwhile: {ab['load_jobs_done_per_gpu']}"]
            lines += _table(["timing shape", "alone (median)", "busy (median)", "busy / alone", "noise limit", "within"],
                            [[s, x["alone"], x["busy"], x["busy_over_alone"], f"{x['noise_limit']:.2%}", x["within_noise"]]
                             for s, x in ab["agreement"]["shapes"].items()])
    if d.get("optimize_error"):
        lines += ["", f"## Scripted `astra optimize`: failed: {d['optimize_error']}"]
    o = d.get("optimize")
    if o:
        lines += ["", f"## Scripted `astra optimize`, K = {o['k']} (hand-written replies, not an LLM result)", "",
                  f"best {o['best']}, x{o['best_gain_over_start']:.3f} over the start; {o['wall_s']} s; ncu profile: {o['profile']}", ""]
        lines += _table(["candidate", "GPU", "verdict"], [[c, x["gpu"], x["verdict"]] for c, x in o["placement"].items()])
    lines += ["", "Sections took (s): " + ", ".join(f"{k} {v}" for k, v in d["sections_s"].items()), ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def throughput_section(data: dict[str, Any], kind: str, counts: list[int], cands: list[Variant], run_dir: Path,
                       dry: int) -> None:
    ray = None
    if kind == "ray":
        from triforge.executors import ray_executor as executor_ray

        ray = executor_ray._import_ray(local=True)
        ray.init(num_gpus=dry or None, include_dashboard=False, log_to_driver=False, logging_level="WARNING",
                 _node_ip_address="127.0.0.1")
        data["ray"] = {"version": ray.__version__, "cluster_resources": ray.cluster_resources()}
    try:
        for g in counts:
            row = throughput(kind, g, cands, run_dir)
            data["throughput"].append(row)
            print(f"{kind:5s} G={g}: {row['wall_s']:7.1f} s for {len(cands)} -> {row['candidates_per_min']:6.1f}/min "
                  f"(warm-up {row['warmup_s']} s); on {sorted(set(map(str, row['placed_on'].values())))}", flush=True)
            rows = [r for r in data["throughput"] if r["executor"] == kind]
            one = next((r for r in rows if r["gpus"] == 1), None)
            for r in rows:
                r["speedup_over_1_gpu"] = round(r["candidates_per_min"] / one["candidates_per_min"], 3) if one else None
                r["target_speedup"] = round(0.9 * r["gpus"], 2)
            data["verdicts"] = verdict_identity(data["throughput"])
    finally:
        if ray is not None:
            ray.shutdown()


def optimize_section(data: dict[str, Any], k: int, out: Path, profile: bool) -> None:
    opt_dir = out / "optimize-run"
    try:
        data["optimize"] = scripted_optimize(k, opt_dir, profile)
    except Exception as e:  # noqa: BLE001 - recorded; the measurements before it stay
        data["optimize_error"] = f"{type(e).__name__}: {str(e)[:400]}"
        print(f"scripted optimize failed: {data['optimize_error']}", flush=True)
    for name in ("report.md", "results.json"):
        if (opt_dir / name).is_file():
            shutil.copy(opt_dir / name, out / f"optimize-{name}")
    shutil.rmtree(opt_dir, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpus", default="1,2,4,8", help="GPU counts to measure, capped at the visible ones")
    ap.add_argument("--executors", default="local,ray")
    ap.add_argument("--reps", type=int, default=3, help="timings of the probe alone and under load")
    ap.add_argument("--kind", default="", help="the machine's name for the record (e.g. nvidia-h200-x8)")
    ap.add_argument("--no-profile", action="store_true", help="no ncu digest in the scripted optimize run")
    ap.add_argument("--skip", default="", help="sections to leave out: throughput,alone,optimize")
    ap.add_argument("--dry-run-gpus", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    dry = a.dry_run_gpus
    if dry:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(dry)))
    visible = visible_gpus()
    if visible < 1:
        print("astra_multi_gpu: no GPU visible (nvidia-smi, CUDA_VISIBLE_DEVICES); run it on a GPU machine", file=sys.stderr)
        return 2
    try:
        requested = sorted({int(x) for x in a.gpus.split(",") if x.strip()})
    except ValueError:
        print(f"astra_multi_gpu: --gpus takes counts like 1,2,4,8, not {a.gpus!r}", file=sys.stderr)
        return 2
    counts = [g for g in requested if 1 <= g <= visible] or [1]
    executors = [e for e in a.executors.split(",") if e]
    skip = set(a.skip.split(","))
    a.out.mkdir(parents=True, exist_ok=True)
    cands = candidate_set()
    data: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "kind": a.kind, "dry_run": bool(dry),
        "visible_gpus": visible, "gpu_inventory": gpu_inventory(), "requested_gpu_counts": requested,
        "measured_gpu_counts": counts, "not_measured_gpu_counts": [g for g in requested if g > visible],
        "executors": executors, "candidates": [cid(v) for v in cands], "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "throughput": [], "sections_s": {}}
    try:
        import torch

        data["torch"] = torch.__version__
    except ImportError:
        pass
    data["isolation"] = isolation_preflight()
    save = lambda: (a.out / "astra-multi-gpu.json").write_text(json.dumps(data, indent=1, default=str))  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="astra-multi-gpu-") as td:
        run_dir = Path(td)
        # the Ray passes last: each of their candidates starts a cold lab worker, the slowest section
        order = [("throughput", k) for k in executors if k != "ray"] + [("alone", None), ("optimize", None)] + \
            [("throughput", k) for k in executors if k == "ray"]
        for section, kind in order:
            if section in skip:
                continue
            t0 = time.perf_counter()
            if section == "throughput":
                throughput_section(data, kind, counts, cands, run_dir, dry)
            elif section == "alone":
                data["alone_vs_busy"] = alone_vs_busy(max(counts), cands, a.reps, run_dir)
            else:
                optimize_section(data, max(counts), a.out, not a.no_profile)
            data["sections_s"][section + (f" {kind}" if kind else "")] = round(time.perf_counter() - t0, 1)
            save()
    write_md(data, a.out / "astra-multi-gpu.md")
    print((a.out / "astra-multi-gpu.md").read_text())
    ident = data.get("verdicts", {}).get("identical")
    return 1 if ident is False else 0


if __name__ == "__main__":
    sys.exit(main())
