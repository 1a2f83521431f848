"""The confined astra worker on the GPU, side by side with an unconfined one (`--isolation none`).

    python benchmarks/astra_isolation.py --out FILE.json [--checks 5]

Per mode: worker start (to ready, no CUDA yet), first check (CUDA context, compile, oracle, timing),
warm check p50, and the worker's memory read from /proc on the host (VmHWM, VmData, VmPeak); then a
compile bomb (`__device__ int big[1 << 28] = {1}`) in the harness's confined compile (4 GiB bound)
and in a worker bounded at --bomb-mb.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src")]

from triforge.astra.check_host import check  # noqa: E402
from triforge.astra.evaluate import EvalOptions  # noqa: E402
from triforge.astra.task import get_task  # noqa: E402
from triforge.astra.worker import Worker  # noqa: E402
from triforge.confine.isolation import IsolationPolicy  # noqa: E402

TASK = "silu_and_mul"
BOMB = "__device__ int triforge_bomb[1 << 28] = {1};\n"


def _worker_status(w: Worker) -> dict[str, int]:
    """VmHWM / VmData / VmPeak (MiB) of the worker's Python process, found under the launcher on the host."""
    top = psutil.Process(w.process.popen.pid) if w.process else None
    procs = [top, *top.children(recursive=True)] if top else []
    for p in procs:
        try:
            if "triforge.astra.worker_main" in " ".join(p.cmdline()):
                fields = dict(line.split(":", 1) for line in Path(f"/proc/{p.pid}/status").read_text().splitlines())
                return {k: int(fields[k].split()[0]) >> 10 for k in ("VmHWM", "VmData", "VmPeak")}
        except (psutil.Error, OSError, KeyError):
            continue
    return {}


def mode(policy: IsolationPolicy, checks: int) -> dict:
    src = get_task(TASK).baseline_source()
    w = Worker(timeout=600, policy=policy)
    try:
        t0 = time.perf_counter()
        w.start()
        start_s = time.perf_counter() - t0
        walls, verdicts = [], []
        for _ in range(checks + 1):
            t1 = time.perf_counter()
            r = check(TASK, src, EvalOptions(runs=100), w)
            walls.append(time.perf_counter() - t1)
            verdicts.append(r["verdict"])
        bench = w.call({"kind": "bench", "task": TASK, "source": src, "options": {"runs": 30, "use_compile": True}},
                       timeout=900)
        return {"isolation": w.isolation, "start_s": start_s, "first_check_s": walls[0],
                "warm_check_p50_s": statistics.median(walls[1:]), "verdicts": verdicts,
                "bench_rows": len(bench.get("rows", [])), "bench_error": bench.get("reasons"),
                "worker_mib": _worker_status(w)}
    finally:
        w.stop()


def bomb(bomb_mb: int) -> dict:
    from triforge.astra.compile import compile_confined, options_for

    src = BOMB + get_task(TASK).baseline_source()
    names = list(get_task(TASK).name_expressions().values())
    t0 = time.perf_counter()
    res = compile_confined(src, names, options_for("sm_90", False))
    out: dict = {"harness_compile": {"ok": res.ok, "log": res.log[-300:], "s": time.perf_counter() - t0}}
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with Worker(timeout=900, memory_mb=bomb_mb) as w:
        t1 = time.perf_counter()
        r = w.call({"kind": "evaluate", "task": TASK, "source": src, "options": {"timing": False}}, timeout=900)
        out["worker"] = {"bound_mib": bomb_mb, "verdict": r.get("verdict"), "reasons": r.get("reasons"),
                         "s": time.perf_counter() - t1}
        t2 = time.perf_counter()
        after = check(TASK, get_task(TASK).baseline_source(), EvalOptions(timing=False, shapes="fuzz"), w)
        out["next_check"] = {"verdict": after["verdict"], "s": time.perf_counter() - t2}
    out["harness_maxrss_growth_mib"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) >> 10
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--checks", type=int, default=5)
    ap.add_argument("--bomb-mb", type=int, default=8192)
    a = ap.parse_args()
    res = {"confined": mode(IsolationPolicy(), a.checks), "unconfined": mode(IsolationPolicy(enabled=False), a.checks)}
    for name, m in res.items():
        print(f"{name:10s} start {m['start_s']:.2f} s, first check {m['first_check_s']:.2f} s, warm p50 "
              f"{m['warm_check_p50_s']:.3f} s, {m['verdicts'][-1]}, bench rows {m['bench_rows']}, "
              f"worker {m['worker_mib']} MiB; {m['isolation']}", flush=True)
    res["bomb"] = bomb(a.bomb_mb)
    print(json.dumps(res["bomb"], indent=1), flush=True)
    Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
