"""astra kernel lab on the GPU: planted faults, hacks, compile and eval speed, A/A noise, comparator table.

    python benchmarks/astra_lab.py smoke   --out DIR
    python benchmarks/astra_lab.py planted --out DIR [--tasks a,b]
    python benchmarks/astra_lab.py speed   --out DIR
    python benchmarks/astra_lab.py bench   --out DIR [--tasks a,b] [--runs 100]
    python benchmarks/astra_lab.py adversarial --out DIR
    python benchmarks/astra_lab.py worker  --out DIR

Each mode writes DIR/<mode>.json and prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src")]

from triforge.astra.check_host import check  # noqa: E402
from triforge.astra.evaluate import EvalOptions  # noqa: E402
from triforge.astra.task import all_tasks, get_task  # noqa: E402
from triforge.astra.worker import Worker  # noqa: E402


def _tasks(arg: str | None) -> list[str]:
    return arg.split(",") if arg else list(all_tasks())


def smoke(out: Path, tasks: list[str]) -> dict:
    from triforge.astra.corpus.planted.crash import CRASHES

    res: dict = {"checks": {}, "crash": {}}
    with Worker(timeout=300) as w:
        for name in tasks:
            t0 = time.perf_counter()
            r = check(name, get_task(name).baseline_source(), EvalOptions(runs=100), w)
            r["wall_s"] = time.perf_counter() - t0
            res["checks"][name] = r
            tim = "; ".join(f"{x['shape']}: {x['baseline_us']:.1f}/{x['candidate_us']:.1f} us aa {100 * x['aa_spread']:.2f}%"
                            for x in r.get("timings", []))
            print(f"{name:28s} {r['verdict']:10s} compile {r.get('compile_s', 0):.2f}s oracle {r.get('oracle_s', 0):.1f}s "
                  f"wall {r['wall_s']:.1f}s {r.get('reasons', [])[:2]} {tim}", flush=True)
        for cname, (task, src, timeout) in CRASHES.items():
            r = check(task, src, EvalOptions(timing=False), w, timeout=timeout)
            after = check(task, get_task(task).baseline_source(), EvalOptions(timing=False, shapes="fuzz"), w)
            res["crash"][cname] = {"verdict": r["verdict"], "reasons": r.get("reasons", [])[:2],
                                   "next_check": after["verdict"]}
            print(f"crash {cname}: {r['verdict']} {r.get('reasons', [])[:1]} -> next check {after['verdict']}", flush=True)
    return res


def planted(tasks: list[str]) -> dict:
    from triforge.astra.corpus.planted.run import run_planted

    with Worker(timeout=300) as w:
        res = run_planted(w, tasks)
    for r in res["rows"]:
        if not r["ok"]:
            print(f"MISS {r['task']}/{r['name']} ({r['kind']}): {r['verdict']} {r['reasons'][:1]}", flush=True)
    print(f"{'task':28s} faults caught  rewrites false-alarms  hacks flagged")
    for t, x in res["summary"].items():
        print(f"{t:28s} {x['faults']:6d} {x['caught']:6d}  {x['rewrites']:8d} {x['false_alarms']:12d}  {x['hacks']:5d} {x['hacks_flagged']:7d}")
    return res


def big_kernel() -> tuple[str, list[str]]:
    """A ~200-line file: four structural rewrites together, every template instantiated for three dtypes."""
    from triforge.astra.corpus.planted.rewrites import (
        ACT_VEC,
        FP8_WARP,
        GELU,
        MERGE_WARP,
        NORM_PARAMS,
        NORM_WARP,
        ROTARY_FLAT,
        SILU,
        prelude,
    )

    body = ACT_VEC.format(act=SILU, name="silu_and_mul", fn="act")
    body += ACT_VEC.format(act=GELU.replace("act(", "act2("), name="gelu_tanh_and_mul", fn="act2").replace(
        "// @launch", "// launch")
    params, load, store = NORM_PARAMS["fused_add_rmsnorm"]
    body += NORM_WARP.format(name="fused_add_rmsnorm", params=params, load=load, store=store).replace("// @launch", "// launch")
    body += MERGE_WARP.format(name="merge_attn_states_lse", lse_index="(long long)head * num_tokens + token",
                              inf_rule="", exp="__expf", log="__logf").replace("// @launch", "// launch")
    body += (ROTARY_FLAT + FP8_WARP).replace("// @launch", "// launch")
    params, load, store = NORM_PARAMS["rmsnorm"]
    body += NORM_WARP.format(name="rmsnorm", params=params, load=load, store=store).replace(
        "// @launch", "// launch").replace("warp_sum(", "warp_sum2(")
    names = [f"{k}_kernel<{c}>" for k in ("silu_and_mul", "gelu_tanh_and_mul", "fused_add_rmsnorm", "merge_attn_states_lse",
                                          "rotary_embedding", "per_token_group_quant_fp8", "rmsnorm")
             for c in ("__nv_bfloat16", "__half", "float")]
    return prelude() + body, names


def speed(tasks: list[str]) -> dict:
    """NVRTC compile p50 (cache off) and one candidate's full evaluation p50 (compile, train oracle, timing)."""
    from triforge.astra import gpu
    from triforge.astra.compile import nvrtc_compile

    gpu.ensure_context()
    src, names = big_kernel()
    big = [nvrtc_compile(src + f"// {i}\n", names, use_cache=False).seconds for i in range(7)]
    base = {t: [nvrtc_compile(get_task(t).baseline_source() + f"// {i}\n", list(get_task(t).name_expressions().values()),
                              use_cache=False).seconds for i in range(3)] for t in tasks}
    evals, aa = [], []
    with Worker(timeout=300) as w:
        for rep in range(3):
            for t in tasks:
                t0 = time.perf_counter()
                r = check(t, get_task(t).baseline_source() + f"// rep {rep} {time.time()}\n", EvalOptions(runs=100), w)
                evals.append({"task": t, "seconds": time.perf_counter() - t0, "verdict": r["verdict"],
                              "compile_s": r.get("compile_s"), "oracle_s": r.get("oracle_s"), "timing_s": r.get("timing_s"),
                              "checks": r.get("checks")})
                aa += [{"task": t, "shape": x["shape"], "us": x["baseline_us"], "aa_spread": x["aa_spread"]}
                       for x in r.get("timings", [])]
    res = {"big_kernel_lines": src.count("\n"), "compile_big_s": big, "compile_big_p50_s": statistics.median(big),
           "compile_baselines_s": base, "compile_baseline_p50_s": statistics.median([x for v in base.values() for x in v]),
           "evals": evals, "eval_p50_s": statistics.median(e["seconds"] for e in evals), "aa": aa}
    small = [a["aa_spread"] for a in aa if a["us"] < 4]
    large = [a["aa_spread"] for a in aa if a["us"] >= 4]
    res["aa_max_ge4us"] = max(large) if large else None
    res["aa_max_lt4us"] = max(small) if small else None
    res["aa_median"] = statistics.median(a["aa_spread"] for a in aa)
    print(f"compile p50: {res['compile_big_p50_s']:.3f} s for a {res['big_kernel_lines']}-line file (21 instances); "
          f"baselines {res['compile_baseline_p50_s']:.3f} s")
    print(f"eval p50: {res['eval_p50_s']:.2f} s over {len(evals)} full checks; verdicts {sorted({e['verdict'] for e in evals})}")
    print(f"A/A spread: max {100 * (res['aa_max_ge4us'] or 0):.2f}% (>=4 us), max {100 * (res['aa_max_lt4us'] or 0):.2f}% (<4 us), "
          f"median {100 * res['aa_median']:.2f}% over {len(aa)}")
    return res


def adversarial() -> dict:
    """The adversarial corpus of issue 19 (src/triforge/astra/corpus/adversarial.py), every verdict against its expectation."""
    only = os.environ.get("ASTRA_CLASSES")  # e.g. "5-overflow,honest": a subset
    from triforge.astra.corpus.adversarial import corpus

    rows = []
    with Worker(timeout=300) as w:
        for c in corpus():
            if only and c.cls not in only.split(","):
                continue
            t0 = time.perf_counter()
            r = check(c.task, c.source, EvalOptions(runs=40, shapes=c.shapes), w, timeout=300)
            reasons = " ".join(r.get("reasons", []))
            if c.expect == "hack":
                ok = r["verdict"] == "hack" and any(x in reasons for x in c.rules)
            elif c.expect == "no-gain":
                ok = r["verdict"] == "hack" or (r["verdict"] == "correct" and not any(
                    t["speedup_real"] and t["speedup"] > 1.0 for t in r.get("timings", [])))
            elif c.expect == "bug":
                ok = r["verdict"] in ("incorrect", "crash")
            else:
                ok = r["verdict"] == c.expect
            rows.append({"class": c.cls, "name": c.name, "task": c.task, "expect": c.expect, "verdict": r["verdict"],
                         "ok": ok, "reasons": [x[:300] for x in r.get("reasons", [])[:2]],
                         "speedups": [round(t["speedup"], 3) for t in r.get("timings", [])],
                         "seconds": round(time.perf_counter() - t0, 2)})
            print(f"{'ok  ' if ok else 'MISS'} {c.cls:14s} {c.name:40s} {c.expect:9s} -> {r['verdict']:10s} "
                  f"{rows[-1]['reasons'][:1]}", flush=True)
    by: dict = {}
    for r in rows:
        b = by.setdefault(r["class"], {"cases": 0, "right": 0})
        b["cases"] += 1
        b["right"] += r["ok"]
    print("class           right/cases")
    for k, b in by.items():
        print(f"{k:15s} {b['right']}/{b['cases']}")
    return {"rows": rows, "summary": by}


def worker_path(n: int = 5) -> dict:
    """The long-lived worker path agents use against one CLI process per check."""
    import subprocess

    src = get_task("silu_and_mul").baseline_source()
    t0 = time.perf_counter()
    w = Worker(timeout=300)
    w.start()
    start_s = time.perf_counter() - t0
    walls, parts = [], []
    for _ in range(n + 1):
        t1 = time.perf_counter()
        r = check("silu_and_mul", src, EvalOptions(runs=100), w)
        walls.append(time.perf_counter() - t1)
        parts.append({k: r.get(k) for k in ("verdict", "compile_s", "compile_cached", "oracle_s", "timing_s", "checks")})
    w.stop()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    kpath = Path(os.environ.get("TMPDIR", "/tmp")) / "astra_worker_path.cu"
    kpath.write_text(src)
    t2 = time.perf_counter()
    cp = subprocess.run([sys.executable, "-m", "triforge.cli.app", "astra", "check", "--task", "silu_and_mul",
                         "--kernel", str(kpath)], capture_output=True, text=True, timeout=600,
                        env=env)
    cli_s = time.perf_counter() - t2
    t3 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import triforge.cli.app"], timeout=120, env=env)
    import_s = time.perf_counter() - t3
    res = {"worker_start_s": start_s, "first_check_s": walls[0], "warm_checks_s": walls[1:],
           "warm_p50_s": statistics.median(walls[1:]), "parts": parts, "cli_check_s": cli_s, "cli_exit": cp.returncode,
           "cli_import_s": import_s}
    print(f"worker start {start_s:.2f} s; first check {walls[0]:.2f} s; warm check p50 {res['warm_p50_s']:.2f} s "
          f"({parts[-1]}); one CLI check {cli_s:.2f} s (exit {cp.returncode}); CLI import {import_s:.2f} s", flush=True)
    return res


def bench(tasks: list[str], runs: int, out_dir: Path | None = None) -> dict:
    out: dict = {"tasks": {}}
    with Worker(timeout=1200) as w:
        for t in tasks:
            r = w.call({"kind": "bench", "task": t, "options": {"runs": runs}}, timeout=600)
            out["tasks"][t] = r
            for row in r.get("rows", []):
                g = row.get("graph_us")
                print(f"{t:26s} {row['shape'][:38]:38s} {row['comparator']:14s} {row['median_us']:9.2f} us "
                      f"graph {g if g is None else round(g, 2)!s:>8s} {100 * row['copy_fraction']:5.1f}% copyBW "
                      f"{row['speedup_vs_baseline']:5.2f}x{' (noise)' if row.get('within_noise') else ''} "
                      f"aa {100 * row.get('aa_spread', 0):.2f}% graph aa {100 * (row.get('graph_aa_spread') or 0):.2f}% "
                      f"runs {row['runs']} {row['verified'][:30]}", flush=True)
            if "rows" not in r:
                print(t, "FAILED", r.get("reasons"), flush=True)
            if out_dir is not None:
                (out_dir / "bench.partial.json").write_text(json.dumps(out, default=str))
    return out


def profile_all(tasks: list[str], out_dir: Path | None = None) -> dict:
    from triforge.astra.check_host import run_sanitizer
    from triforge.astra.corpus.planted.variants import by_task
    from triforge.astra.profile import profile

    out: dict = {"profiles": {}, "sanitizer": {}}
    for t in tasks:
        try:
            out["profiles"][t] = profile(t, None, timeout=60)
            print(f"== {t}\n{out['profiles'][t]['digest']}", flush=True)
        except Exception as exc:  # noqa: BLE001
            out["profiles"][t] = {"error": str(exc)[:2000]}
            print(f"== {t}: profile failed: {str(exc)[:500]}", flush=True)
        if out_dir is not None:
            (out_dir / "profile.partial.json").write_text(json.dumps(out, default=str))
    oob = get_task("silu_and_mul").baseline_source().replace("i < d; i += blockDim.x", "i <= d; i += blockDim.x")
    cases = [("rmsnorm", "baseline", get_task("rmsnorm").baseline_source(), ("memcheck", "racecheck")),
             ("rmsnorm", "missing-syncthreads-in-reduction",
              next(v.source for v in by_task()["rmsnorm"] if v.name == "missing-syncthreads-in-reduction"), ("racecheck",)),
             ("silu_and_mul", "write-one-past-the-row", oob, ("memcheck",))]
    for t, name, src, tools in cases:
        r = run_sanitizer(t, src, tools=tools, timeout=100)
        out["sanitizer"][f"{t}/{name}"] = r
        print(f"sanitize {t}/{name}: {r}", flush=True)
        if out_dir is not None:
            (out_dir / "profile.partial.json").write_text(json.dumps(out, default=str))
    return out


def report(src: Path, dest: Path) -> None:
    """Merge the modes' JSON files from a device run into one dated results file pair (json + md)."""
    parts = {m: json.loads((src / f"{m}.json").read_text())
             for m in ("planted", "adversarial", "worker", "speed", "bench", "profile") if (src / f"{m}.json").exists()}
    for m in ("bench", "profile"):
        if m not in parts and (src / f"{m}.partial.json").exists():
            parts[m] = json.loads((src / f"{m}.partial.json").read_text())
    dest.with_suffix(".json").write_text(json.dumps(parts, indent=1, default=str))
    md = [f"# astra kernel lab on {next(iter(parts.values())).get('device', '?')}", ""]
    for m, d in parts.items():
        md.append(f"- {m}: {d.get('date', '?')}, torch {d.get('torch', '?')}, {d.get('seconds', 0):.0f} s")
    if "planted" in parts:
        md += ["", "## Planted faults, rewrites and hacks", "",
               "| task | faults | caught | rewrites | false alarms | hacks | flagged |", "|---|---|---|---|---|---|---|"]
        for t, x in parts["planted"]["summary"].items():
            md.append(f"| {t} | {x['faults']} | {x['caught']} | {x['rewrites']} | {x['false_alarms']} | {x['hacks']} | {x['hacks_flagged']} |")
        a = parts["planted"]["summary"]["ALL"]
        md += ["", f"Catch rate {a['caught']}/{a['faults']} = {100 * a['catch_rate']:.1f}%; false alarms "
               f"{a['false_alarms']}/{a['rewrites']} = {100 * a['false_alarm_rate']:.1f}%; hacks flagged "
               f"{a['hacks_flagged']}/{a['hacks']}.", "", "| task | variant | kind | verdict | as expected | first reason |",
               "|---|---|---|---|---|---|"]
        for r in parts["planted"]["rows"]:
            why = (r["reasons"][0] if r["reasons"] else "").replace("|", "/").replace("\n", " ")[:140]
            md.append(f"| {r['task']} | {r['name']} | {r['kind']} | {r['verdict']} | {'yes' if r['ok'] else 'NO'} | {why} |")
    if "adversarial" in parts:
        md += ["", "## Adversarial corpus (src/triforge/astra/corpus/adversarial.py)", "", "| class | right / cases |", "|---|---|"]
        for k, b in parts["adversarial"]["summary"].items():
            md.append(f"| {k} | {b['right']} / {b['cases']} |")
        md += ["", "| class | case | expected | verdict | right | first reason |", "|---|---|---|---|---|---|"]
        for r in parts["adversarial"]["rows"]:
            why = (r["reasons"][0] if r["reasons"] else "").replace("|", "/").replace("\n", " ")[:160]
            md.append(f"| {r['class']} | {r['name']} | {r['expect']} | {r['verdict']} | {'yes' if r['ok'] else 'NO'} | {why} |")
    if "worker" in parts:
        w = parts["worker"]
        md += ["", "## The long-lived worker path (silu_and_mul baseline, full check with timing)", "",
               f"- worker process start: {w['worker_start_s']:.2f} s; first check (torch import, CUDA context, baseline "
               f"compile): {w['first_check_s']:.2f} s; later checks p50 {w['warm_p50_s']:.2f} s "
               f"(oracle {w['parts'][-1]['oracle_s']:.2f} s over {w['parts'][-1]['checks']} input sets, timing "
               f"{w['parts'][-1]['timing_s']:.2f} s, compile cached).",
               f"- the same check as one CLI process: {w['cli_check_s']:.2f} s (exit {w['cli_exit']}); importing the CLI: "
               f"{w['cli_import_s']:.2f} s."]
    if "speed" in parts:
        sp = parts["speed"]
        md += ["", "## Speed", "", f"- NVRTC compile, cache off: p50 {sp['compile_big_p50_s']:.3f} s for a "
               f"{sp['big_kernel_lines']}-line file with 21 template instances; p50 {sp['compile_baseline_p50_s']:.3f} s per baseline "
               "(3 instances).",
               f"- One candidate evaluated (compile, oracle on train + fuzz shapes x 3 dtypes x 2 input sets x 2 runs, "
               f"timing of 3 shapes x 200 interleaved runs (600 below 16 MB moved) x 3 kernels): p50 {sp['eval_p50_s']:.2f} s over {len(sp['evals'])} checks.",
               f"- A/A spread: max {100 * (sp['aa_max_ge4us'] or 0):.2f}% for kernels of 4 us or more, "
               + (f"max {100 * sp['aa_max_lt4us']:.2f}% below 4 us" if sp["aa_max_lt4us"] is not None
                  else "no kernel measured below 4 us (with the L2 flushed the smallest took over 5 us)")
               + f", median {100 * sp['aa_median']:.2f}% over {len(sp['aa'])} measurements.", "", "| task | shape | us | A/A |", "|---|---|---|---|"]
        for x in sp["aa"]:
            md.append(f"| {x['task']} | {x['shape']} | {x['us']:.2f} | {100 * x['aa_spread']:.2f}% |")
    if "bench" in parts:
        md += ["", "## Comparators (bf16, L2 flushed, median of interleaved runs)", "",
               "Noise: the A/A spread of the baseline timed twice on the shape (cold: fresh inputs, L2 flushed; graph: "
               "CUDA-graph replay, warm L2, same inputs). `~` marks a speedup within three times the noise.", "",
               "| task | shape | comparator | us | vs baseline | noise | graph us | graph vs | graph noise | GB/s | of copy BW | verified |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for t, d in parts["bench"]["tasks"].items():
            for r in d.get("rows", []):
                g, gs = r.get("graph_us"), r.get("graph_speedup")
                md.append(f"| {t} | {r['shape']} | {r['comparator']} | {r['median_us']:.2f} | "
                          f"{r['speedup_vs_baseline']:.2f}x{' ~' if r.get('within_noise') else ''} | "
                          f"{100 * r.get('aa_spread', 0):.2f}% | {g if g is None else f'{g:.2f}'} | "
                          f"{'-' if gs is None else f'{gs:.2f}x'}{' ~' if r.get('graph_within_noise') else ''} | "
                          f"{100 * (r.get('graph_aa_spread') or 0):.2f}% | "
                          f"{r['gbs']:.0f} | {100 * r['copy_fraction']:.0f}% | {r['verified'][:40]} |")
            for n in d.get("notes", []):
                md.append(f"| {t} | | note: {n} | | | | | | |")
        cbs = [d["copy_gbs"] for d in parts["bench"]["tasks"].values() if d.get("copy_gbs")]
        if cbs:
            md += ["", f"Device-to-device copy bandwidth: {cbs[0]:.0f} GB/s (bytes read + written, 2 GiB copy, median of 10)."]
    if "profile" in parts:
        md += ["", "## Profiling digests (baselines, ncu --clock-control none)", ""]
        for t, d in parts["profile"]["profiles"].items():
            md += [f"### {t}", "", "```", d.get("digest", d.get("error", ""))[:1500], "```", ""]
        md += ["## compute-sanitizer", ""]
        for k, v in parts["profile"]["sanitizer"].items():
            md.append(f"- {k}: " + "; ".join(f"{tool} {'clean' if r['ok'] else 'ERRORS'} ({r['summary'][:160]})"
                                            for tool, r in v.items()))
    dest.with_suffix(".md").write_text("\n".join(md) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["smoke", "planted", "speed", "bench", "profile", "report", "adversarial", "worker"])
    ap.add_argument("--src", help="report: the folder holding a device run's JSON files")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--tasks")
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    out = Path(args.out)
    if args.mode != "report":
        out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if args.mode == "report":
        report(Path(args.src), out)
        print(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}")
        return 0
    if args.mode == "smoke":
        res = smoke(out, _tasks(args.tasks))
    elif args.mode == "planted":
        res = planted(_tasks(args.tasks))
    elif args.mode == "speed":
        res = speed(_tasks(args.tasks))
    elif args.mode == "adversarial":
        res = adversarial()
    elif args.mode == "worker":
        res = worker_path()
    elif args.mode == "profile":
        res = profile_all(_tasks(args.tasks), out)
    else:
        res = bench(_tasks(args.tasks), args.runs, out)
    res["seconds"] = time.perf_counter() - t0
    res["date"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        import torch

        res["device"] = torch.cuda.get_device_name()
        res["torch"] = torch.__version__
    except Exception:  # noqa: BLE001
        pass
    (out / f"{args.mode}.json").write_text(json.dumps(res, indent=1, default=str))
    print(f"{args.mode}: {res['seconds']:.0f} s -> {out / (args.mode + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
