"""What the kernel sandbox's 0.1 s watch costs per check, and a cell's round trip, this tree beside another.

    .venv/bin/python benchmarks/sandbox_watch_cost.py [--old-src TREE/src] [--rounds 300]

The watch of a cell (`proc.watches`, built as `KernelSandbox._execute` builds it: the folder limit over the
working folder and the kernel's own folders, the memory of the tree where no memory cgroup holds it, taken
over all the kernel's processes as when a cell has started children) is
called `--rounds` times on a live kernel that has imported numpy (its /proc maps then run to about 1,000
lines); and `execute("1+1")` is timed as often. With `--old-src`, the same is measured for that tree in a
child process, interleaved round by round is not possible across processes, so the two run one after the
other twice (new, old, new, old) and the medians are given per run. Writes
benchmarks/results/sandbox-watch-cost-DATE-{root,user}.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def measure(rounds: int) -> dict:
    import tempfile

    from triforge.confine import proc
    from triforge.sandbox.kernel_sandbox import KernelSandbox

    work = Path(tempfile.mkdtemp(prefix="watch-cost-"))
    with KernelSandbox(work) as box:
        box.execute("import numpy")
        kernel = box._kernel
        no_cgroup = "memory" not in kernel.cgroups.dirs
        try:  # this tree: every writable folder, the kernel's held files, growth from the first cell
            watch = proc.watches(kernel.members, tree_memory_mb=4096 if no_cgroup else None,
                                 folder=(box._writable(kernel), 2048), holders=kernel.members,
                                 since=box._folder_since(kernel))
        except (TypeError, AttributeError):  # a tree before 2026-12-07: the working folder only
            watch = proc.watches(kernel.members, tree_memory_mb=4096 if no_cgroup else None,
                                 folder=(box.workdir, 2048))
        assert watch is not None
        checks = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            assert watch() is None
            checks.append(time.perf_counter() - t0)
        trips = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            assert box.execute("1+1").result == "2"
            trips.append(time.perf_counter() - t0)
    q = lambda xs, p: sorted(xs)[int(p * (len(xs) - 1))] * 1e3  # noqa: E731
    return {"check_p50_ms": q(checks, 0.5), "check_p90_ms": q(checks, 0.9), "roundtrip_p50_ms": q(trips, 0.5),
            "roundtrip_p90_ms": q(trips, 0.9), "memory_measured": no_cgroup, "rounds": rounds}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-src", default=None)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.rounds)))
        return
    runs = []
    trees = [("this tree", None)] + ([("before", args.old_src)] if args.old_src else [])
    for _ in range(2):
        for label, src in trees:
            env = dict(os.environ, PYTHONPATH=str(Path(src).resolve())) if src else dict(os.environ)
            out = subprocess.run([sys.executable, __file__, "--child", "--rounds", str(args.rounds)], env=env,
                                 capture_output=True, text=True, check=True)
            runs.append({"tree": label, **json.loads(out.stdout.strip().splitlines()[-1]),
                         "load": round(os.getloadavg()[0], 2)})
            print(runs[-1], flush=True)
    who = "root" if os.geteuid() == 0 else "user"
    date = dt.date.today().isoformat()
    out = ROOT / "results" / f"sandbox-watch-cost-{date}-{who}"
    out.with_suffix(".json").write_text(json.dumps({"date": date, "who": who, "cores": os.cpu_count(),
                                                    "runs": runs}, indent=1))
    lines = [f"# The kernel sandbox's watch: cost per check and a cell's round trip, {date} ({who})", "",
             f"{os.cpu_count()} cores; a kernel that imported numpy; {args.rounds} checks and round trips per run; "
             "runs one after the other (load beside each). The memory of the tree is measured only where no "
             "memory cgroup holds it (an ordinary user), over all the kernel's processes, as when a cell has started "
             "children (without children the sandbox measures the kernel's memfd files only).", "",
             "| tree | check p50 ms | check p90 ms | `execute(\"1+1\")` p50 ms | p90 ms | memory measured | load |",
             "|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['tree']} | {r['check_p50_ms']:.3f} | {r['check_p90_ms']:.3f} | "
                     f"{r['roundtrip_p50_ms']:.2f} | {r['roundtrip_p90_ms']:.2f} | {r['memory_measured']} | "
                     f"{r['load']} |")
    med = {t: statistics.median(r["check_p50_ms"] for r in runs if r["tree"] == t) for t, _ in trees}
    lines += ["", "Median check p50 per tree: " + ", ".join(f"{t} {v:.3f} ms" for t, v in med.items())
              + "; a check runs every 0.1 s while a cell runs, so 1 ms is 1% of a core."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
