"""`triforge cpagent refs` over every instance: the new path cold (empty cache) and warm (the same cache), and
the old path (no fork server, no reuse of cached results) in the same run, one after the other.

Run: nice .venv/bin/python benchmarks/cpagent_refs_speed.py [--skip-old] [--problem ID ...]
Writes benchmarks/results/cpagent-refs-speed-DATE.{json,md}. Target (issue 40): under 240 s on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def refs(home: Path, runtime: Path, out: Path, *, old: bool, problems: list[str]) -> dict:
    env = dict(os.environ, TRIFORGE_HOME=str(home), TRIFORGE_RUNTIME_DIR=str(runtime))
    env.pop("TRIFORGE_ISOLATION", None)
    argv = [sys.executable, "-m", "triforge.cli.app", "cpagent", "refs", "--json", str(out)]
    for p in problems:
        argv += ["--problem", p]
    if old:
        env["TRIFORGE_FORKSERVER"] = "0"
        argv.append("--rerun")
    before = load()
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - t0
    data = json.loads(out.read_text()) if out.is_file() else {"results": []}
    rs = data["results"]
    ran = [r for r in rs if not r.get("cached")]
    top = sorted(ran, key=lambda r: -r["duration_s"])[:8]
    return {"wall_s": wall, "exit": done.returncode, "instances": len(rs), "ran": len(ran),
            "cached": len(rs) - len(ran), "as_expected_line": done.stdout.strip().splitlines()[-3:],
            "summed_s": sum(r["duration_s"] for r in ran),
            "longest": [(r["problem_id"], r["instance"], round(r["duration_s"], 1), r["status"]) for r in top],
            "load_before": before, "load_after": load()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-old", action="store_true")
    ap.add_argument("--problem", action="append", default=[])
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="refs-speed-"))
    rt = work / "rt"
    rt.mkdir(mode=0o700)
    report = {"date": args.date, "machine": f"{os.cpu_count()} cores, {os.uname().release}", "nice": os.nice(0),
              "problems": args.problem or "all"}
    print("new path, cold ...", flush=True)
    report["new_cold"] = refs(work / "home-new", rt, work / "new-cold.json", old=False, problems=args.problem)
    print(json.dumps(report["new_cold"], indent=1), flush=True)
    report["new_warm"] = refs(work / "home-new", rt, work / "new-warm.json", old=False, problems=args.problem)
    print(json.dumps(report["new_warm"], indent=1), flush=True)
    if not args.skip_old:
        print("old path ...", flush=True)
        report["old"] = refs(work / "home-old", rt, work / "old.json", old=True, problems=args.problem)
        print(json.dumps(report["old"], indent=1), flush=True)
    out = ROOT / "results" / f"cpagent-refs-speed-{args.date}"
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    lines = [f"# cpagent refs speed, {args.date}", "", f"Machine: {report['machine']}, niceness {report['nice']}, "
             "shared with other jobs (load beside each row). Problems: "
             f"{report['problems']}.", "", "| path | wall s | runs / cached | summed run s | load before -> after |",
             "|---|---|---|---|---|"]
    for name in ("new_cold", "new_warm", "old"):
        if name in report:
            r = report[name]
            lines.append(f"| {name} | {r['wall_s']:.1f} | {r['ran']} / {r['cached']} | {r['summed_s']:.0f} | "
                         f"{r['load_before']} -> {r['load_after']} |")
    lines += ["", "Longest runs of the cold run (these dominate its wall time):", ""]
    lines += [f"- {p}#{k}: {s} s ({st})" for p, k, s, st in report["new_cold"]["longest"]]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
