"""Reference runs with CP-SAT's workers matched to the cores, beside the 8-worker portfolio `refs` uses.

Run: nice .venv/bin/python benchmarks/cpagent_refs_workers.py [--workers 1,2,8] [--case PROBLEM#INSTANCE ...]
Writes benchmarks/results/cpagent-refs-workers-DATE.{json,md}.

Each case runs alone (one job), once per worker count, one after the other, so each run has the whole machine.
On a machine of C cores, `refs` runs C jobs at a time, so what the settings cost a whole run is about:
- one worker, C jobs (threads matched to cores, each run on its own core): sum of the 1-worker times / C;
- C workers, one job (threads matched to cores, one run at a time): sum of the C-worker times;
- 8 workers, C jobs (what `refs` does; runs share the cores): sum of the 8-worker times (C runs at a time, each
  at 1/C of the machine).
A run that ends at its budget (an optimisation reference that does not prove its optimum, or a timeout)
takes its budget under every setting; only how good its solution is changes. The report also gives the floor
that those runs set for a cold `refs` on C cores from the recorded durations (ref_durations.toml's run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
DEFAULT_CASES = [
    "csplib_001_car_sequencing#5", "csplib_001_car_sequencing#7", "csplib_001_car_sequencing#10",
    "csplib_001_car_sequencing#20", "csplib_001_car_sequencing#23", "csplib_005_autocorrelation#2",
    "csplib_006_golomb_rulers#2", "csplib_013_progressive_party_problem#8", "csplib_010_social_golfers_problem#8",
    "cmo_2012#0", "csplib_002_template_design#1",
]
RECORDED = ROOT / "results" / "cpbench-refs-cli-2026-12-03c.json"


def floor(cores: int) -> dict:
    """What the runs that end at their budget set as a lower bound on a cold `refs` run (recorded run)."""
    from triforge.cpagent.dataset import load_dataset
    from triforge.cpagent.ref_budgets import ref_budget

    rs = json.loads(RECORDED.read_text())["results"]
    probs = {p.id: p for p in load_dataset(None, sorted({r["problem_id"] for r in rs}))}
    at_budget = [r for r in rs if r["status"] == "timeout" or (
        r["status"] == "FEASIBLE" and probs[r["problem_id"]].is_optimization
        and r["duration_s"] >= 0.95 * ref_budget(probs[r["problem_id"]], r["instance"]))]
    total = sum(r["duration_s"] for r in rs)
    bound = sum(r["duration_s"] for r in at_budget)
    return {"recorded_run": RECORDED.name, "runs": len(rs), "summed_s": round(total, 1),
            "at_budget": [(r["problem_id"], r["instance"], r["status"], round(r["duration_s"], 1)) for r in at_budget],
            "at_budget_summed_s": round(bound, 1), "floor_s": round(bound / cores, 1), "cores": cores}


def measure(cases: list[tuple[str, int]], workers: list[int]) -> list[dict]:
    from triforge.cpagent.dataset import load_dataset
    from triforge.cpagent.ref_budgets import ref_budget
    from triforge.cpagent.refs import run_reference

    probs = {p.id: p for p in load_dataset(None, sorted({p for p, _ in cases}))}
    rows = []
    for pid, k in cases:
        for w in workers:
            os.environ["TRIFORGE_CPBENCH_WORKERS"] = str(w)
            r = run_reference(probs[pid], k)
            rows.append({"case": f"{pid}#{k}", "workers": w, "status": r.status, "objective": r.objective,
                         "s": round(r.duration_s, 2), "budget_s": ref_budget(probs[pid], k),
                         "load": round(os.getloadavg()[0], 2)})
            print(json.dumps(rows[-1]), flush=True)
            time.sleep(1)
    return rows


def estimates(rows: list[dict], workers: list[int], cores: int) -> tuple[dict, list[str]]:
    """What the cases would cost a whole run under each setting, leaving out the cases that end at their budget
    under every setting (they cost the same everywhere: the floor below)."""
    everywhere = [c for c in dict.fromkeys(r["case"] for r in rows)
                  if all(r["s"] >= 0.95 * r["budget_s"] for r in rows if r["case"] == c)]
    sums = {w: sum(r["s"] for r in rows if r["workers"] == w and r["case"] not in everywhere) for w in workers}
    est = {f"1 worker, {cores} jobs": sums[1] / cores if 1 in sums else None,
           f"{cores} workers, 1 job": sums.get(cores), f"8 workers, {cores} jobs (refs)": sums.get(8)}
    return est, everywhere


def write(report: dict, date: str) -> str:
    rows, cores, fl = report["rows"], report["cores"], report["floor"]
    workers = sorted({r["workers"] for r in rows})
    est, everywhere = estimates(rows, workers, cores)
    lines = [f"# Reference runs: CP-SAT workers matched to the cores, {date}", "",
             f"Machine: {cores} cores ({report['machine']}); each case alone, once per worker count (the 1-minute load "
             "average at its end beside it; above 2.5, other work shared the machine). Seconds as the runner "
             "measures them.", "",
             "| case | " + " | ".join(f"{w} worker{'s' * (w > 1)}" for w in workers) + " |",
             "|---|" + "---|" * len(workers)]
    for case in dict.fromkeys(r["case"] for r in rows):
        cells = []
        for w in workers:
            r = next(x for x in rows if x["case"] == case and x["workers"] == w)
            obj = f" obj {r['objective']}" if r["objective"] is not None else ""
            cells.append(f"{r['s']:.1f} s {r['status']}{obj} (load {r['load']})")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    lines += ["", "What these cases would cost a whole run under each setting (see the module's docstring)"
              + (f"; left out, as they end at their budget under every setting: {', '.join(everywhere)}" if everywhere
                 else "") + ":", ""]
    lines += [f"- {k}: {v:.1f} s" for k, v in est.items() if v is not None]
    lines += ["", f"Floor from the runs that end at their budget ({fl['recorded_run']}: {fl['runs']} runs, "
              f"{fl['summed_s']} s summed): {len(fl['at_budget'])} runs, {fl['at_budget_summed_s']} s, so at least "
              f"{fl['floor_s']} s of wall time on {cores} cores whatever the workers, before any other run:", ""]
    lines += [f"- {p}#{k}: {s} s ({st})" for p, k, st, s in fl["at_budget"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="1,2,8")
    ap.add_argument("--case", action="append", default=[], help="PROBLEM#INSTANCE (repeatable)")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--report-only", action="store_true", help="rewrite the .md from the date's .json")
    args = ap.parse_args()
    out = ROOT / "results" / f"cpagent-refs-workers-{args.date}"
    cores = len(os.sched_getaffinity(0))
    if args.report_only:
        report = json.loads(out.with_suffix(".json").read_text())
    else:
        cases = [(c.split("#")[0], int(c.split("#")[1])) for c in (args.case or DEFAULT_CASES)]
        rows = measure(cases, [int(w) for w in args.workers.split(",")])
        report = {"date": args.date, "cores": cores, "machine": os.uname().release, "rows": rows, "floor": floor(cores)}
        out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    text = write(report, args.date)
    out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
