"""Sandbox speed, measured side by side with an unhardened jupyter_client kernel in one run.

    .venv/bin/python benchmarks/sandbox.py [--rounds 300] [--out benchmarks/results]
    .venv/bin/python tests/core/unprivileged.py -- benchmarks/sandbox.py --out DIR   # as nobody, from root

Measures: `execute("1+1")` round trip (hardened vs plain kernel, interleaved), cold start of both,
a sandbox from a pool ready to execute (pool refilled, and back to back), recovery after a kernel
death with and without a pool, a one-shot isolated program (`run_isolated`) against a plain
`subprocess.run` of the same program, and `proc.run` against `subprocess.run`. The result files
are named by the path measured: `sandbox-DATE-root` (namespaces and cgroups as root) or
`sandbox-DATE-user` (an ordinary user: unprivileged user namespaces), plus `--tag` (e.g. `-b`).
The machine is shared: the load average and how busy the CPUs were (all processes, from /proc/stat)
are recorded at start and end, with the benchmark's own nice value. `--hogs N --hog-nice K` adds a
known load of its own: N busy-looping processes at nice K for the whole run (recorded in the results).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from jupyter_client.manager import start_new_kernel

from triforge.confine.proc import run
from triforge.confine.run import run_isolated
from triforge.sandbox.kernel_sandbox import KernelSandbox
from triforge.sandbox.pool import KernelPool


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def ms(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": pct(xs, 0.5) * 1e3, "p90_ms": pct(xs, 0.9) * 1e3, "n": len(xs)}


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def plain_execute(kc) -> None:
    reply = kc.execute_interactive("1+1", timeout=10, output_hook=lambda msg: None)
    assert reply["content"]["status"] == "ok"


def bench_roundtrip(rounds: int) -> dict[str, dict[str, float]]:
    km, kc = start_new_kernel(kernel_name="python3")
    sb = KernelSandbox()
    try:
        for _ in range(20):  # warm both
            plain_execute(kc)
            sb.execute("1+1")
        hard, plain = [], []
        for i in range(rounds):  # interleaved, alternating who goes first, so both see the same noise
            pair = [lambda: hard.append(timed(lambda: sb.execute("1+1"))), lambda: plain.append(timed(lambda: plain_execute(kc)))]
            for f in pair if i % 2 == 0 else pair[::-1]:
                f()
        assert sb.execute("1+1").result == "2"
        paired = statistics.median(h / p for h, p in zip(hard, plain, strict=True))
        return {"hardened": ms(hard), "plain_jupyter_client": ms(plain), "paired_ratio_median": paired,
                "isolation": sb.isolation.summary()}
    finally:
        sb.close()
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def bench_cold_start(n: int) -> dict[str, dict[str, float]]:
    hard, plain = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        sb = KernelSandbox()
        sb.execute("1+1")
        hard.append(time.perf_counter() - t0)
        sb.close()
        t0 = time.perf_counter()
        km, kc = start_new_kernel(kernel_name="python3")
        plain_execute(kc)
        plain.append(time.perf_counter() - t0)
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return {"hardened": ms(hard), "plain_jupyter_client": ms(plain)}


def bench_pool(n: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with KernelPool(size=2) as pool:
        for label, refill, workdir in (("refilled", True, False), ("refilled_given_workdir", True, True), ("back_to_back", False, False)):
            ready, first = [], []
            for i in range(n):
                if refill:
                    while pool.ready_count < pool.size:
                        time.sleep(0.02)
                    time.sleep(0.2)  # let the machine settle after the refill
                t0 = time.perf_counter()
                sb = pool.sandbox(f"/tmp/triforge-bench-wd-{os.getpid()}-{i}" if workdir else None)
                ready.append(time.perf_counter() - t0)
                assert sb.execute("1+1").result == "2"
                first.append(time.perf_counter() - t0)
                sb.close()
                if workdir:
                    subprocess.run(["rm", "-rf", str(sb.workdir)], check=True)
            out[f"{label}_sandbox_ready"] = ms(ready)
            out[f"{label}_first_result"] = ms(first)
    return out


def bench_recovery(n: int) -> dict[str, dict[str, float]]:
    out = {}
    with KernelPool(size=1) as pool:
        for label, make in (("no_pool", KernelSandbox), ("pool", pool.sandbox)):
            xs = []
            with make() as sb:
                for _ in range(n):
                    if label == "pool":
                        while pool.ready_count < 1:
                            time.sleep(0.02)
                    t0 = time.perf_counter()
                    r = sb.execute("import os; os._exit(1)")
                    assert r.restarted and sb.execute("1+1").result == "2"
                    xs.append(time.perf_counter() - t0)
            out[f"kernel_death_to_next_result_{label}"] = ms(xs)
    return out


def bench_proc(rounds: int) -> dict[str, dict[str, float]]:
    ours, plain = [], []
    for _ in range(rounds):
        ours.append(timed(lambda: run(["true"])))
        plain.append(timed(lambda: subprocess.run(["true"], capture_output=True)))
    return {"proc_run_true": ms(ours), "subprocess_run_true": ms(plain)}


def bench_one_shot(rounds: int) -> dict[str, dict[str, float]]:
    """A graded program's overhead: `python -c pass` isolated vs plain, interleaved."""
    argv = [sys.executable, "-I", "-c", "pass"]
    iso, plain = [], []
    with tempfile.TemporaryDirectory() as wd:
        run_isolated(argv, workdir=wd, timeout=30)  # the once-per-process probe of what holds
        for _ in range(rounds):
            iso.append(timed(lambda: run_isolated(argv, workdir=wd, timeout=30)))
            plain.append(timed(lambda: subprocess.run(argv, capture_output=True, cwd=wd)))
    return {"isolated_python_pass": ms(iso), "plain_python_pass": ms(plain)}


def render(res: dict) -> str:
    rt, cold, pool = res["roundtrip"], res["cold_start"], res["pool"]
    rows = [
        ("execute('1+1') round trip, hardened sandbox", rt["hardened"], "<= 5 ms"),
        ("execute('1+1') round trip, plain jupyter_client kernel", rt["plain_jupyter_client"], ""),
        ("cold start to first result, hardened sandbox", cold["hardened"], "<= 500 ms"),
        ("cold start to first result, plain jupyter_client kernel", cold["plain_jupyter_client"], ""),
        ("pool.sandbox() ready, pool refilled", pool["refilled_sandbox_ready"], "<= 100 ms"),
        ("pool.sandbox() to first result, pool refilled", pool["refilled_first_result"], ""),
        ("pool.sandbox(workdir) ready, pool refilled", pool["refilled_given_workdir_sandbox_ready"], ""),
        ("pool.sandbox() ready, back to back (pool drained)", pool["back_to_back_sandbox_ready"], ""),
        ("kernel death to next result, no pool", res["recovery"]["kernel_death_to_next_result_no_pool"], ""),
        ("kernel death to next result, pool", res["recovery"]["kernel_death_to_next_result_pool"], ""),
        ("one-shot program `python -c pass`, isolated (run_isolated)", res["one_shot"]["isolated_python_pass"], "report"),
        ("one-shot program `python -c pass`, plain subprocess.run", res["one_shot"]["plain_python_pass"], ""),
        ("proc.run(['true'])", res["proc"]["proc_run_true"], ""),
        ("subprocess.run(['true'])", res["proc"]["subprocess_run_true"], ""),
    ]
    lines = [
        f"# sandbox, {res['path']} ({res['date']}, {res['machine']})",
        "",
        f"Isolation in force: {rt['isolation']}",
        "",
        "| measure | p50 | p90 | n | target |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {name} | {v['p50_ms']:.2f} ms | {v['p90_ms']:.2f} ms | {v['n']} | {t} |" for name, v, t in rows]
    ratio = rt["hardened"]["p50_ms"] / rt["plain_jupyter_client"]["p50_ms"]
    lines += [
        "",
        f"Round trip, hardened / plain: {ratio:.2f}x at p50, {rt['paired_ratio_median']:.2f}x median of paired rounds"
        " (interleaved in one run).",
        f"Measured at {res['utc']} (nice {res['nice']}); load average at start "
        f"{', '.join(f'{x:.1f}' for x in res['load_average_at_start'])}, at end "
        f"{', '.join(f'{x:.1f}' for x in res['load_average_at_end'])}; CPUs busy {res['cpu_busy_fraction']:.0%} "
        f"of the run's {res['wall_s']:.0f} s (every process, the benchmark's own included; the machine is shared: "
        "other work runs beside the benchmark).",
    ]
    if res.get("hogs"):
        lines.append(f"Added load: {res['hogs']['processes']} busy-looping processes at nice {res['hogs']['nice']} "
                     "for the whole run.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--tag", default="", help="appended to the result files' names, e.g. --tag=-b")
    ap.add_argument("--hogs", type=int, default=0, help="busy-looping processes to run beside the benchmark")
    ap.add_argument("--hog-nice", type=int, default=10, help="their nice value")
    args = ap.parse_args()
    hogs = [subprocess.Popen(["nice", "-n", str(args.hog_nice), sys.executable, "-c", "while True: pass"])
            for _ in range(args.hogs)]
    try:
        measure(args)
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def measure(args: argparse.Namespace) -> None:
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    root = os.geteuid() == 0
    label = ("root" if root else "user") + args.tag
    busy0, total0 = cpu_times()
    t0 = time.monotonic()
    res = {
        "date": date,
        "path": "as root (namespaces, cgroups)" if root else f"as uid {os.geteuid()} (user namespaces)",
        "utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores python {platform.python_version()}",
        "load_average_at_start": os.getloadavg(),
        "nice": os.nice(0),
        "hogs": {"processes": args.hogs, "nice": args.hog_nice} if args.hogs else None,
        "roundtrip": bench_roundtrip(args.rounds),
        "cold_start": bench_cold_start(args.starts),
        "pool": bench_pool(args.starts * 2),
        "recovery": bench_recovery(args.starts),
        "one_shot": bench_one_shot(max(args.rounds // 10, 10)),
        "proc": bench_proc(args.rounds),
    }
    busy, total = cpu_times()
    res.update(load_average_at_end=os.getloadavg(), wall_s=time.monotonic() - t0,
               cpu_busy_fraction=(busy - busy0) / max(total - total0, 1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"sandbox-{date}-{label}.json").write_text(json.dumps(res, indent=2) + "\n")
    md = render(res)
    (args.out / f"sandbox-{date}-{label}.md").write_text(md)
    sys.stdout.write(md)


if __name__ == "__main__":
    main()
