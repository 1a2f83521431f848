"""Where the time of `triforge cpagent grade` goes, and the new path (confined fork server, content-keyed
reference cache, lazy CLI) side by side with the old one (one-shot confined runs, per-command warm harness)
in one run.

Run: nice .venv/bin/python benchmarks/cpagent_grade_speed.py [--reps 9] [--sample 100] [--old-sample 20]
Writes benchmarks/results/cpagent-grade-speed-DATE.{json,md}. Targets (issue 40): CLI grading with isolation
on <= 1 s p50 warm, <= 2 s cold; `--help`/`--version` < 0.3 s; 1,400 submissions one CLI call each, two at a
time, under 15 minutes on 2 cores (extrapolated from `--sample` calls; the report says so).

`--model-check off` rows: the grading without issue 41's model-level check (on by default, `sample`).
The old path is the same code with TRIFORGE_FORKSERVER=0 (every program one-shot; harness jobs in a
confined warm server started by each command) and an empty reference cache for each call ("no cache").
"Cold" on the new path: no fork server running and an empty cache; "warm": both already there.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TRIFORGE = [sys.executable, "-m", "triforge.cli.app"]
PROBLEMS = ("csplib_054_n_queens", "knapsack")  # a satisfaction problem (template + check) and an optimisation one


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def wall(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    dt = time.perf_counter() - t0
    if out.returncode not in (0, 1):  # 1: a verdict other than correct, still a graded call
        raise RuntimeError(f"{argv}: exit {out.returncode}: {out.stderr[-800:]}")
    return dt


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def p90(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(round(0.9 * len(xs))) - 1)] if xs else float("nan")


def env_for(runtime: Path, home: Path, *, old: bool) -> dict[str, str]:
    env = dict(os.environ, TRIFORGE_RUNTIME_DIR=str(runtime), TRIFORGE_HOME=str(home))
    if old:
        env["TRIFORGE_FORKSERVER"] = "0"
    env.pop("TRIFORGE_ISOLATION", None)
    return env


def stop_servers(runtime: Path) -> None:
    from triforge.confine.forkserver import stop_all

    stop_all(runtime)
    time.sleep(0.3)


def submissions(work: Path) -> dict[str, Path]:
    from triforge.cpagent.dataset import load_dataset

    out = {}
    for p in load_dataset(None):
        path = work / f"{p.id}.py"
        path.write_text(p.reference_source)
        out[p.id] = path
    return out


def split(work: Path, runtime: Path, reps: int) -> dict[str, dict[str, float]]:
    """The parts of one grading call, each measured on its own (medians of `reps`)."""
    from triforge.confine.forkserver import run_forked
    from triforge.confine.run import run_isolated
    from triforge.cpagent.dataset import load_problem
    from triforge.cpagent.program_run import PRELOAD
    from triforge.cpagent.refs import RefCache, run_reference

    os.environ["TRIFORGE_RUNTIME_DIR"] = str(runtime)
    parts: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        parts.setdefault(name, []).append(seconds)

    prog = work / "empty" / "prog.py"
    prog.parent.mkdir(exist_ok=True)
    prog.write_text("pass\n")
    imp = work / "imp" / "prog.py"
    imp.parent.mkdir(exist_ok=True)
    imp.write_text("import cpmpy, ortools.sat.python.cp_model\n")
    queens = load_problem(None, "csplib_054_n_queens")
    knap = load_problem(None, "knapsack")
    cache = RefCache(work / "split-cache")
    run_forked([sys.executable, "-I", str(prog)], workdir=prog.parent, timeout=60, preload=PRELOAD)  # start it
    for _ in range(reps):
        add("interpreter start (python -c pass)", wall([sys.executable, "-c", "pass"]))
        add("`triforge --version` (lazy CLI)", wall([*TRIFORGE, "--version"]))
        add("imports of the grade path (typer, CLI, grader), less start",
            wall([sys.executable, "-c", "import triforge.cli.app, triforge.cli.cpagent, triforge.cpagent.grader"])
            - parts["interpreter start (python -c pass)"][-1])
        add("cpmpy + OR-Tools import, less start",
            wall([sys.executable, "-c", "import cpmpy, ortools.sat.python.cp_model"])
            - parts["interpreter start (python -c pass)"][-1])
        t0 = time.perf_counter()
        run_isolated([sys.executable, "-I", str(prog)], workdir=prog.parent, timeout=60)
        add("one-shot confined launch of an empty program", time.perf_counter() - t0)
        t0 = time.perf_counter()
        run_isolated([sys.executable, "-I", str(imp)], workdir=imp.parent, timeout=60)
        add("one-shot confined program importing cpmpy (old path, per program)", time.perf_counter() - t0)
        t0 = time.perf_counter()
        run_forked([sys.executable, "-I", str(imp)], workdir=imp.parent, timeout=60, preload=PRELOAD)
        add("forked confined program importing cpmpy (new path, warm server)", time.perf_counter() - t0)
        ref = run_reference(knap, 0)
        add("knapsack reference's own run (solve)", ref.duration_s)
        cache.put(ref)
        t0 = time.perf_counter()
        assert cache.get(knap, 0) is not None
        add("knapsack reference from the cache", time.perf_counter() - t0)
        from triforge.cpagent.grader import grade_program

        t0 = time.perf_counter()
        (v,) = grade_program(queens, work / "subs" / "csplib_054_n_queens.py", cache=cache, model_check="off")
        add("in-process grading of queens: program run (forked)", v.run_s)
        add("in-process grading of queens: fix-and-solve check", v.check_s)
        add("in-process grading of queens: total", time.perf_counter() - t0)
    return {k: {"median_s": median(v), "n": len(v)} for k, v in parts.items()}


def largest_imports(n: int = 8) -> list[tuple[str, float]]:
    """The grade path's top-level imports by cumulative time (`python -X importtime`), in seconds."""
    code = "import triforge.cli.app, triforge.cli.cpagent, triforge.cpagent.grader"
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         timeout=120).stderr
    top = []
    for line in err.splitlines():
        parts = line.split("|")
        depth = len(parts[2]) - len(parts[2].lstrip(" ")) if len(parts) == 3 else 0
        if depth in (1, 3):  # what the three modules import, and themselves
            try:
                top.append((parts[2].strip(), int(parts[1]) / 1e6))
            except ValueError:
                continue
    return sorted(top, key=lambda t: -t[1])[:n]


def grade_cmd(sub: Path, problem: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [*TRIFORGE, "cpagent", "grade", "--problem", problem, "--submission", str(sub), *extra]


NO_MODEL_CHECK = ("--model-check", "off")  # the grading alone, without issue 41's model-level check


def cli_side_by_side(work: Path, subs: dict[str, Path], reps: int) -> dict[str, dict[str, float]]:
    """One grading call per run, the four variants interleaved so that load hits them alike."""
    rt_new, rt_old = work / "rt-new", work / "rt-old"
    for d in (rt_new, rt_old):
        d.mkdir(mode=0o700, exist_ok=True)
    warm_home = work / "home-warm"
    times: dict[str, list[float]] = {}
    for problem in PROBLEMS:
        sub = subs[problem]
        wall(grade_cmd(sub, problem), env_for(rt_new, warm_home, old=False))  # warm the server and the cache
        for i in range(reps):
            fresh = Path(tempfile.mkdtemp(dir=work, prefix="home-"))
            times.setdefault(f"{problem}: old path, no cache", []).append(
                wall(grade_cmd(sub, problem), env_for(rt_old, fresh, old=True)))
            fresh2 = Path(tempfile.mkdtemp(dir=work, prefix="home-"))
            wall(grade_cmd(sub, problem), env_for(rt_old, fresh2, old=True))
            times.setdefault(f"{problem}: old path, cache warm", []).append(
                wall(grade_cmd(sub, problem), env_for(rt_old, fresh2, old=True)))
            stop_servers(rt_new)
            cold_home = Path(tempfile.mkdtemp(dir=work, prefix="home-"))
            times.setdefault(f"{problem}: new path, cold (no server, no cache)", []).append(
                wall(grade_cmd(sub, problem), env_for(rt_new, cold_home, old=False)))
            times.setdefault(f"{problem}: new path, warm", []).append(
                wall(grade_cmd(sub, problem), env_for(rt_new, warm_home, old=False)))
            times.setdefault(f"{problem}: new path, warm, --model-check off", []).append(
                wall(grade_cmd(sub, problem, NO_MODEL_CHECK), env_for(rt_new, warm_home, old=False)))
            times.setdefault(f"{problem}: old path, cache warm, --model-check off", []).append(
                wall(grade_cmd(sub, problem, NO_MODEL_CHECK), env_for(rt_old, fresh2, old=True)))
            print(f"  {problem} rep {i + 1}/{reps} ({load()})", flush=True)
    return {k: {"p50_s": median(v), "p90_s": p90(v), "n": len(v)} for k, v in times.items()}


def throughput(work: Path, subs: dict[str, Path], n: int, *, old: bool, problems: list[str],
               extra: tuple[str, ...] = ()) -> dict[str, float]:
    """`n` grading calls, two at a time, over `problems` round robin (each problem's first call may solve
    its reference; later ones find it cached)."""
    tag = ("old" if old else "new") + ("-mc-off" if extra else "")
    runtime = work / f"tp-{tag}"
    runtime.mkdir(mode=0o700, exist_ok=True)
    home = work / f"tp-home-{tag}"
    env = env_for(runtime, home, old=old)
    calls = [problems[i % len(problems)] for i in range(n)]
    t0 = time.perf_counter()
    before = load()
    with ThreadPoolExecutor(max_workers=2) as pool:
        each = list(pool.map(lambda p: wall(grade_cmd(subs[p], p, extra), env), calls))
    total = time.perf_counter() - t0
    if not old:
        stop_servers(runtime)
    return {"calls": n, "wall_s": total, "per_call_p50_s": median(each), "per_call_p90_s": p90(each),
            "extrapolated_1400_min": total / n * 1400 / 60, "load_before": before, "load_after": load()}


def fast_problems(subs: dict[str, Path], k: int) -> list[str]:
    """Problems whose reference answers in a few seconds here (the bulk of CP-Bench), by id."""
    from triforge.cpagent.dataset import load_dataset

    return [p.id for p in load_dataset(None) if p.time_limit_s <= 60 and p.id != "cmo_2012"][:k]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--sample", type=int, default=100, help="grading calls on the new path, two at a time")
    ap.add_argument("--old-sample", type=int, default=20, help="the same on the old path (it is slow)")
    ap.add_argument("--problems", type=int, default=25, help="distinct problems in the throughput sample")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--throughput-only", action="store_true",
                    help="only `--sample` calls on the new path (e.g. all 1,400), to cpagent-grade-throughput-DATE")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grade-speed-"))
    (work / "subs").mkdir()
    subs = submissions(work / "subs")
    if args.throughput_only:
        chosen = fast_problems(subs, args.problems)
        res = {"date": args.date, "machine": f"{os.cpu_count()} cores", "nice": os.nice(0), "problems": chosen,
               "new": throughput(work, subs, args.sample, old=False, problems=chosen)}
        out = ROOT / "results" / f"cpagent-grade-throughput-{args.date}"
        out.with_suffix(".json").write_text(json.dumps(res, indent=1))
        t = res["new"]
        out.with_suffix(".md").write_text(
            f"# {t['calls']} grading calls, one CLI call each, two at a time, {args.date}\n\n"
            f"{res['machine']}, niceness {res['nice']}; {len(chosen)} problems round robin (their reference programs "
            f"as submissions, default --model-check sample): wall {t['wall_s']:.1f} s ({t['wall_s'] / 60:.1f} min), "
            f"per call p50 {t['per_call_p50_s']:.2f} s, p90 {t['per_call_p90_s']:.2f} s; "
            f"{t['load_before']} -> {t['load_after']}. Measured, not extrapolated.\n")
        print(out.with_suffix(".md").read_text())
        return
    report: dict = {"date": args.date, "machine": f"{os.cpu_count()} cores, {os.uname().release}",
                    "nice": os.nice(0), "start_load": load(), "user": os.getuid()}
    print("split ...", flush=True)
    report["split"] = split(work, work / "rt-split", max(3, args.reps // 3))
    stop_servers(work / "rt-split")
    report["split_load"] = load()
    report["largest_imports"] = largest_imports()
    print("CLI side by side ...", flush=True)
    report["cli"] = cli_side_by_side(work, subs, args.reps)
    report["cli_load"] = load()
    chosen = fast_problems(subs, args.problems)
    print("throughput ...", flush=True)
    report["throughput_new"] = throughput(work, subs, args.sample, old=False, problems=chosen)
    report["throughput_new-mc-off"] = throughput(work, subs, args.sample, old=False, problems=chosen,
                                                 extra=NO_MODEL_CHECK)
    report["throughput_old"] = throughput(work, subs, args.old_sample, old=True, problems=chosen)
    report["throughput_problems"] = chosen
    report["end_load"] = load()
    write(report)


def write(report: dict) -> None:
    out = ROOT / "results" / f"cpagent-grade-speed-{report['date']}"
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    lines = [f"# cpagent grade speed, {report['date']}", "",
             f"Machine: {report['machine']}, uid {report['user']}, niceness {report['nice']}; shared with other "
             f"jobs: {report['start_load']} at the start, {report['end_load']} at the end.", "",
             "## Where one grading call's time goes (medians)", "", "| part | seconds |", "|---|---|"]
    lines += [f"| {k} | {v['median_s']:.3f} |" for k, v in report["split"].items()]
    lines += ["", f"({report['split_load']})", "", "Largest imports of the grade path (python -X importtime, "
              "cumulative): " + ", ".join(f"{name} {sec:.3f} s" for name, sec in report["largest_imports"]),
              "", "## CLI grading, old and new path side by side",
              "", "| variant | p50 s | p90 s | n |", "|---|---|---|---|"]
    lines += [f"| {k} | {v['p50_s']:.2f} | {v['p90_s']:.2f} | {v['n']} |" for k, v in report["cli"].items()]
    lines += ["", f"({report['cli_load']})", "", "## Many submissions, one CLI call each, two at a time", "",
              "| path | calls | wall s | per call p50 s | 1,400 calls, extrapolated (min) | load before -> after |",
              "|---|---|---|---|---|---|"]
    for name in ("throughput_new", "throughput_new-mc-off", "throughput_old"):
        t = report[name]
        lines.append(f"| {name.split('_')[1].replace('-mc-off', ', --model-check off')} | {t['calls']} | {t['wall_s']:.1f} | {t['per_call_p50_s']:.2f} | "
                     f"{t['extrapolated_1400_min']:.1f} | {t['load_before']} -> {t['load_after']} |")
    lines += ["", f"Problems of the throughput sample (their own reference programs as submissions, round robin): "
              f"{len(report['throughput_problems'])}. The 1,400-call figure is extrapolated linearly from the "
              "sample, not measured."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
