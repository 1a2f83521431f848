"""CP-Bench harness speed: every reference on every instance, and the cost of grading one solution.

    .venv/bin/python benchmarks/cpbench_refs.py --data dcp-bench-open [--jobs 2]
        [--instances all|default] [--skip-refs] [--corpus tests/cpagent/corpus | --no-corpus] [--corpus-only]
        [--out benchmarks/results]

Part 1 runs the references (the same runner as `triforge cpagent refs`) and reports the wall time,
failures and the slowest runs. Part 2 grades each problem's reference solution (default instance)
with fix-and-solve, warm (forked from a server with cpmpy imported) and cold (a fresh interpreter per
check), and reports p50/p90. Part 3 does the same on the test corpus of new problems (every instance; most
of its references are read by probing), one solution per grading call. Writes cpbench-refs-<date>.json and
.md under --out (cpbench-corpus-<date> with --corpus-only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from triforge.cpagent.dataset import load_dataset
from triforge.cpagent.grader import grade_solutions
from triforge.cpagent.refs import RefResult, run_references


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def bench_refs(problems: list, jobs: int, progress: Path | None = None) -> dict:
    t0 = time.perf_counter()

    def done(r: RefResult) -> None:
        if progress is not None:
            with progress.open("a") as f:
                row = {k: v for k, v in r.to_json().items() if k != "solution"}
                f.write(json.dumps({"t": round(time.perf_counter() - t0, 1), **row}) + "\n")

    results = run_references(problems, jobs=jobs, on_done=done)
    wall = time.perf_counter() - t0
    failed = [r for r in results if not r.ok]
    by_problem: dict[str, float] = {}
    for r in results:
        by_problem[r.problem_id] = by_problem.get(r.problem_id, 0.0) + r.duration_s
    return {
        "_objects": results,
        "wall_s": wall,
        "runs": len(results),
        "ok": len(results) - len(failed),
        "as_expected": sum(r.as_expected for r in results),  # what `triforge cpagent refs` exits 0 on
        "failed": [{"problem": r.problem_id, "instance": r.instance, "status": r.status, "reason": r.reason,
                    "seconds": round(r.duration_s, 2), "expected": r.expected, "as_expected": r.as_expected}
                   for r in failed],
        "slowest": sorted(({"problem": r.problem_id, "instance": r.instance, "seconds": round(r.duration_s, 2),
                            "ok": r.ok} for r in results), key=lambda d: -d["seconds"])[:15],
        "seconds_by_problem": {k: round(v, 2) for k, v in sorted(by_problem.items(), key=lambda kv: -kv[1])},
        # Timings and statuses only: the solutions themselves are derived data and stay out of the repo.
        "results": [{k: v for k, v in r.to_json().items() if k != "solution"} for r in results],
    }


def results_default(results: list[RefResult]) -> list[RefResult]:
    return [r for r in results if r.instance == 0]


def bench_grading(problems: list, refs: dict[str, RefResult]) -> dict:
    out: dict[str, dict] = {}
    for mode in ("warm", "cold"):
        os.environ["TRIFORGE_CPBENCH_WARM"] = "1" if mode == "warm" else "0"
        times: dict[str, float] = {}
        verdicts: dict[str, str] = {}
        for p in problems:
            ref = refs.get(p.id)
            if ref is None or not ref.ok:
                continue
            t0 = time.perf_counter()
            (v,) = grade_solutions(p, [ref.solution], 0, reference=ref)
            times[p.id] = time.perf_counter() - t0
            verdicts[p.id] = v.verdict
        xs = list(times.values())
        out[mode] = {"n": len(xs), "p50_s": _pct(xs, 0.5), "p90_s": _pct(xs, 0.9), "max_s": max(xs, default=0.0),
                     "mean_s": statistics.fmean(xs) if xs else 0.0,
                     "not_correct": sorted(k for k, v in verdicts.items() if v != "correct"),
                     "slowest": sorted(times.items(), key=lambda kv: -kv[1])[:5]}
    os.environ.pop("TRIFORGE_CPBENCH_WARM", None)
    return out


def bench_corpus(corpus: Path, jobs: int) -> dict:
    """Grading time per solution on the new-problem corpus: each instance's reference output, one per call."""
    problems = load_dataset(corpus)
    refs = {(r.problem_id, r.instance): r for r in run_references(problems, jobs=jobs)}
    out: dict[str, dict] = {}
    for mode in ("warm", "cold"):
        os.environ["TRIFORGE_CPBENCH_WARM"] = "1" if mode == "warm" else "0"
        times: dict[str, float] = {}
        verdicts: dict[str, str] = {}
        probed = 0
        for p in problems:
            for k in range(p.n_instances):
                ref = refs[(p.id, k)]
                if not ref.ok:
                    verdicts[f"{p.id}#{k}"] = f"reference {ref.status}"
                    continue
                t0 = time.perf_counter()
                (v,) = grade_solutions(p, [ref.solution], k, reference=ref)
                times[f"{p.id}#{k}"] = time.perf_counter() - t0
                verdicts[f"{p.id}#{k}"] = v.verdict
                probed += any("probing" in n for n in v.notes)
        xs = list(times.values())
        out[mode] = {"problems": len(problems), "n": len(xs), "read_by_probing": probed, "p50_s": _pct(xs, 0.5),
                     "p90_s": _pct(xs, 0.9), "max_s": max(xs, default=0.0),
                     "mean_s": statistics.fmean(xs) if xs else 0.0,
                     "not_correct": sorted(k for k, v in verdicts.items() if v != "correct"),
                     "slowest": sorted(times.items(), key=lambda kv: -kv[1])[:5]}
    os.environ.pop("TRIFORGE_CPBENCH_WARM", None)
    return out


def render_md(rep: dict) -> str:
    lines = [f"# CP-Bench harness benchmark ({rep['date']})", "",
             f"Machine: {rep['machine']}; load average at start {rep['loadavg_start']}, at end {rep['loadavg_end']} "
             "(the machine is shared, so absolute times are noisy).", ""]
    if r := rep.get("refs"):
        lines += ["## References", "",
                  f"- instances: {rep['instances']}, jobs: {rep['jobs']}",
                  f"- runs: {r['runs']}, ok: {r['ok']}, failed: {len(r['failed'])}, as expected: {r.get('as_expected', '-')} "
                  "(a listed no-solution instance proven so, or a listed marginal one out of time)",
                  f"- **wall time: {r['wall_s']:.1f} s**", ""]
        if r["failed"]:
            lines += ["| problem | instance | status | seconds | reason |", "|---|---|---|---|---|"]
            lines += [f"| {f['problem']} | {f['instance']} | {f['status']} | {f['seconds']} | {f['reason']} |"
                      for f in r["failed"][:100]]
            lines.append("")
        lines += ["Slowest runs:", "", "| problem | instance | seconds | ok |", "|---|---|---|---|"]
        lines += [f"| {s['problem']} | {s['instance']} | {s['seconds']} | {s['ok']} |" for s in r["slowest"]]
        lines.append("")
    if g := rep.get("grading"):
        lines += ["## Grading one solution (fix-and-solve, default instance, reference solution)", "",
                  "| mode | n | p50 s | p90 s | max s | mean s | not correct |", "|---|---|---|---|---|---|---|"]
        for mode, d in g.items():
            lines.append(f"| {mode} | {d['n']} | {d['p50_s']:.3f} | {d['p90_s']:.3f} | {d['max_s']:.3f} | "
                         f"{d['mean_s']:.3f} | {', '.join(d['not_correct']) or '-'} |")
        lines.append("")
    if c := rep.get("corpus_grading"):
        lines += [f"## Grading one solution on the new-problem corpus ({rep['corpus']})", "",
                  "Every instance's reference output, one solution per grading call (checks share no subprocess).", "",
                  "| mode | problems | solutions | read by probing | p50 s | p90 s | max s | mean s | not correct |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for mode, d in c.items():
            lines.append(f"| {mode} | {d['problems']} | {d['n']} | {d['read_by_probing']} | {d['p50_s']:.3f} | "
                         f"{d['p90_s']:.3f} | {d['max_s']:.3f} | {d['mean_s']:.3f} | "
                         f"{', '.join(d['not_correct']) or '-'} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="A data set name (dcp-bench-open) or a DCP-Bench-Open checkout (needed unless "
                    "--corpus-only)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--instances", choices=("all", "default"), default="all")
    ap.add_argument("--problem", action="append", default=None)
    ap.add_argument("--skip-refs", action="store_true", help="only the grading part (runs default refs first)")
    ap.add_argument("--corpus", default=os.path.relpath(Path(__file__).parents[1] / "tests" / "cpagent" / "corpus"),
                    help="new-problem corpus (DCP-Bench-Open layout) for part 3")
    ap.add_argument("--no-corpus", action="store_true", help="skip part 3")
    ap.add_argument("--corpus-only", action="store_true", help="only part 3")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    if args.corpus_only:
        return corpus_only(args)
    if not args.data:
        ap.error("--data is needed (or --corpus-only)")
    problems = load_dataset(args.data, args.problem)
    rep: dict = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                 "machine": f"{platform.node()} {os.cpu_count()} cores, {platform.python_version()}",
                 "loadavg_start": [round(x, 2) for x in os.getloadavg()], "jobs": args.jobs,
                 "instances": args.instances}
    chosen = problems if args.instances == "all" else [replace(p, instances=p.instances[:1]) for p in problems]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"cpbench-refs-{datetime.now(UTC):%Y-%m-%d}" + ("" if args.instances == "all" else "-default")
    if not args.skip_refs:
        rep["refs"] = bench_refs(chosen, args.jobs, progress=out / f"{stem}.progress.jsonl")
        kept = {**rep, "refs": {k: v for k, v in rep["refs"].items() if k != "_objects"}}
        (out / f"{stem}.json").write_text(json.dumps(kept, indent=1))  # kept even if the grading part fails
        print(f"refs: {rep['refs']['ok']}/{rep['refs']['runs']} ok, wall {rep['refs']['wall_s']:.1f} s", flush=True)
        refs = {r.problem_id: r for r in results_default(rep["refs"]["_objects"])}
        del rep["refs"]["_objects"]
    else:
        defaults = [replace(p, instances=p.instances[:1]) for p in problems]
        refs = {r.problem_id: r for r in run_references(defaults, jobs=args.jobs)}
    rep["grading"] = bench_grading(problems, refs)
    for mode, d in rep["grading"].items():
        print(f"grading {mode}: p50 {d['p50_s']:.3f} s, p90 {d['p90_s']:.3f} s over {d['n']}", flush=True)
    if not args.no_corpus:
        rep["corpus"], rep["corpus_grading"] = args.corpus, bench_corpus(Path(args.corpus), args.jobs)
        _print_corpus(rep["corpus_grading"])
    rep["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    (out / f"{stem}.json").write_text(json.dumps(rep, indent=1))
    (out / f"{stem}.md").write_text(render_md(rep))
    print(f"wrote {out / stem}.json and .md")


def _print_corpus(c: dict) -> None:
    for mode, d in c.items():
        print(f"corpus grading {mode}: p50 {d['p50_s']:.3f} s, p90 {d['p90_s']:.3f} s over {d['n']} "
              f"({d['read_by_probing']} read by probing; not correct: {d['not_correct'] or 'none'})", flush=True)


def corpus_only(args: argparse.Namespace) -> None:
    rep: dict = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                 "machine": f"{platform.node()} {os.cpu_count()} cores, {platform.python_version()}",
                 "loadavg_start": [round(x, 2) for x in os.getloadavg()], "jobs": args.jobs, "corpus": args.corpus}
    rep["corpus_grading"] = bench_corpus(Path(args.corpus), args.jobs)
    _print_corpus(rep["corpus_grading"])
    rep["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"cpbench-corpus-{datetime.now(UTC):%Y-%m-%d}"
    stem.with_suffix(".json").write_text(json.dumps(rep, indent=1))
    stem.with_suffix(".md").write_text(render_md(rep))
    print(f"wrote {stem}.json and .md")


if __name__ == "__main__":
    main()
