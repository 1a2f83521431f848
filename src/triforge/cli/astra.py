"""`triforge astra`: commands of the astra system."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.table import Column, Table

from triforge.cli.common import console
from triforge.core.errors import UserError
from triforge.core.textfile import read_user_text

app = typer.Typer(help="astra's kernel lab: list tasks, check, time, profile and scan CUDA candidates.",
                  no_args_is_help=True)


def _read_kernel(path: Path | None) -> str | None:
    if path is None:
        return None
    return read_user_text(path, "kernel file", "give the path of a .cu candidate")


@app.command("tasks")
def tasks_cmd() -> None:
    """List the kernel tasks."""
    from triforge.astra.task import all_tasks

    # fits 80 columns: names never cut, counts narrow, the written tensors wrap inside their column
    table = Table(Column("task", no_wrap=True, min_width=25), Column("train", justify="right"),
                  Column("fuzz", justify="right"), Column("held", justify="right"), Column("time", justify="right"),
                  Column("writes (* in place)", overflow="fold"), box=None, pad_edge=False)
    for t in all_tasks().values():
        table.add_row(t.name, str(len(t.train)), str(len(t.fuzz)), str(len(t.heldout)), str(len(t.timing)),
                      " ".join(t.outputs + [f"{k}*" for k in t.inplace]))
    console.print(table)
    console.print("every task runs in bf16, fp16 and fp32", markup=False)


@app.command("check")
def check_cmd(
    task: str = typer.Option(..., "--task", help="Task name (see `triforge astra tasks`)."),
    kernel: Path = typer.Option(..., "--kernel", help="Candidate .cu file."),
    shapes: str = typer.Option("train", "--shapes", help="train | heldout | all"),
    sanitize: bool = typer.Option(False, "--sanitize", help="Also run compute-sanitizer memcheck and racecheck."),
    no_timing: bool = typer.Option(False, "--no-timing", help="Correctness only."),
    fast_math: bool = typer.Option(False, "--fast-math", help="Compile with --use_fast_math (recorded)."),
    seed: int | None = typer.Option(None, "--seed", help="Base seed (default: fresh each run, recorded)."),
    graph: bool = typer.Option(False, "--graph", help="Also report CUDA-graph replay times (warm L2)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Watchdog seconds for the whole check."),
    json_out: str | None = typer.Option(None, "--json", help="Write the full result here."),
    warm: bool = typer.Option(True, "--warm/--no-warm", help="Run in your warm lab worker (started on first use, "
                              "stopped after 10 idle minutes; `astra stop-worker`); --no-warm: a worker for this check only."),
) -> None:
    """Check a candidate: verdict correct / incorrect / hack / crash / compile_error; exit 0 only if correct."""
    import dataclasses

    from triforge.astra import warm_worker
    from triforge.astra.check_host import check, precheck, require_gpu, write_json
    from triforge.astra.evaluate import EvalOptions
    from triforge.astra.task import get_task
    from triforge.astra.worker import Worker

    get_task(task)
    if shapes not in ("train", "heldout", "all"):
        raise UserError(f"--shapes {shapes!r}: use train, heldout or all")
    source = _read_kernel(kernel) or ""
    opts = EvalOptions(shapes=shapes, timing=not no_timing, fast_math=fast_math, base_seed=seed, graph=graph)
    # A hack or a broken interface is reported without a GPU. Where the warm server can run, it makes the same
    # checks first, with NVRTC already loaded, so this process does not load it (about 0.15-0.3 s).
    served = warm and warm_worker.gpu_nodes()
    early = None if served else precheck(task, source)
    if early is None and not served:  # the warm worker asks torch itself, once
        require_gpu()
    if early is not None:
        res = early
    elif warm:
        try:
            res = warm_worker.check(task, source, dataclasses.asdict(opts), timeout, sanitize, str(kernel))
        except Exception:
            if served and (early := precheck(task, source)) is not None:
                res = early  # no worker here, but the verdict needs none
            else:
                raise
    else:
        with Worker(timeout=timeout) as w:
            res = check(task, source, opts, w, sanitize=sanitize, kernel_path=str(kernel))
    write_json(json_out, res)
    style = "green" if res["verdict"] == "correct" else "red"
    console.print(f"[bold {style}]{res['verdict']}[/] {task} {kernel} (seed {res.get('seed', '-')}, "
                  f"{res.get('checks', 0)} checks, compile {res.get('compile_s', 0):.2f} s)")
    for r in res.get("reasons", []):
        console.print(f"  - {r}", markup=False)
    if res.get("timings"):
        table = Table("shape", "baseline us", "candidate us", "speedup", "A/A", "real", "GB/s", "floor us", "of roof",
                      "of peak")
        for t in res["timings"]:
            table.add_row(t["shape"], f"{t['baseline_us']:.2f}", f"{t['candidate_us']:.2f}", f"{t['speedup']:.3f}",
                          f"{100 * t['aa_spread']:.2f}%", "yes" if t["speedup_real"] else "no (noise)",
                          f"{t['candidate_gbs']:.0f}", f"{t.get('floor_us', 0):.2f}",
                          f"{100 * t['roofline_fraction']:.0f}%" if "roofline_fraction" in t else "-",
                          f"{100 * t['peak_fraction']:.0f}%" if "peak_fraction" in t else "-")
        console.print(table)
        console.print("of roof / of peak: the time the DRAM traffic takes at the achievable bandwidth (the lab's own "
                      "streaming kernels) / at the datasheet peak, over the kernel's time", markup=False)
    raise typer.Exit(0 if res["verdict"] == "correct" else 1)


@app.command("stop-worker")
def stop_worker_cmd() -> None:
    """Stop your warm lab worker for this GPU selection (CUDA_VISIBLE_DEVICES), if one is running."""
    from triforge.astra import warm_worker

    console.print("stopped" if warm_worker.stop() else "no warm lab worker was running", markup=False)


@app.command("compare")
def compare_cmd(
    task: str = typer.Option(..., "--task"),
    kernel: Path | None = typer.Option(None, "--kernel", help="Optional candidate to add to the table."),
    runs: int = typer.Option(100, "--runs"),
    no_compile: bool = typer.Option(False, "--no-compile", help="Leave out torch.compile."),
    flashinfer_include: str | None = typer.Option(
        None, "--flashinfer-include", help="FlashInfer's headers (the wheel's flashinfer/data/include folder; default "
        "$TRIFORGE_FLASHINFER_INCLUDE): its kernels are built here once and added to the table, no package needed."),
    json_out: str | None = typer.Option(None, "--json"),
) -> None:
    """Comparator table: baseline, candidate, PyTorch eager, torch.compile, FlashInfer (installed, or built from its headers)."""
    from triforge.astra.check_host import precheck, require_gpu, write_json
    from triforge.astra.task import get_task
    from triforge.astra.worker import Worker

    get_task(task)
    source = _read_kernel(kernel)
    if source is not None and (bad := precheck(task, source)):
        raise UserError(f"candidate rejected before benchmarking: {bad['verdict']}: {bad['reasons'][0]}")
    from triforge.astra.flashinfer_headers import FlashInferError, include_dir, prepared

    try:
        fi_inc = include_dir(flashinfer_include)  # a wrong folder is named before anything starts
        require_gpu()
        fi_lib = prepared(fi_inc, say=lambda m: console.print(m, markup=False))
    except FlashInferError as exc:
        raise UserError(str(exc)) from None
    options = {"runs": runs, "use_compile": not no_compile, "flashinfer_lib": fi_lib}
    with Worker(timeout=1200) as w:
        res = w.call({"kind": "bench", "task": task, "source": source, "options": options})
    if "rows" not in res:
        raise UserError(f"bench failed: {res.get('reasons')}")
    write_json(json_out, res)
    table = Table("shape", "comparator", "median us", "vs baseline", "noise", "graph us", "graph vs", "graph noise",
                  "GB/s", "of roof", "of peak", "verified")
    for r in res["rows"]:
        g, gs = r.get("graph_us"), r.get("graph_speedup")
        mark = " (noise)" if r["within_noise"] and r["comparator"] != "baseline" else ""
        mark += " IMPLAUSIBLE" if not r["plausible"] else ""
        gmark = " (noise)" if r.get("graph_within_noise") and r["comparator"] != "baseline" else ""
        table.add_row(r["shape"], r["comparator"], f"{r['median_us']:.2f}", f"{r['speedup_vs_baseline']:.2f}x{mark}",
                      f"{100 * r['aa_spread']:.2f}%", f"{g:.2f}" if g else "-", f"{gs:.2f}x{gmark}" if gs else "-",
                      f"{100 * r['graph_aa_spread']:.2f}%" if r.get("graph_aa_spread") is not None else "-",
                      f"{r['gbs']:.0f}", f"{100 * r.get('roofline_fraction', r['copy_fraction']):.0f}%",
                      f"{100 * r['peak_fraction']:.0f}%" if "peak_fraction" in r else "-", r["verified"])
    console.print(table)
    console.print(f"achievable bandwidth {res.get('achievable_gbs', 0):.0f} GB/s ({res.get('achievable_note', '')}); "
                  f"torch copy {res['copy_gbs']:.0f} GB/s, peak {res['peak_gbs']:.0f} GB/s; {res['device']}; "
                  f"torch {res['torch']}; noise = A/A spread of the baseline timed twice (cold L2, fresh inputs; graph: "
                  "warm L2, replayed inputs); '(noise)': the speedup is within three times it", markup=False)
    for n in res["notes"]:
        console.print(f"note: {n}", markup=False)


# "bench" names a benchmark run elsewhere (cpagent bench); the old name stays as a hidden alias
app.command("bench", hidden=True)(compare_cmd)


@app.command("profile")
def profile_cmd(
    task: str = typer.Option(..., "--task"),
    kernel: Path | None = typer.Option(None, "--kernel", help="Candidate .cu (default: the baseline)."),
    shape_index: int = typer.Option(0, "--shape-index", help="Index into the task's timing shapes."),
    dtype: str = typer.Option("bf16", "--dtype"),
    json_out: str | None = typer.Option(None, "--json"),
) -> None:
    """ncu metrics (clocks left alone) and ptxas numbers, condensed into a digest."""
    from triforge.astra.check_host import write_json
    from triforge.astra.profile import profile

    _read_kernel(kernel)
    res = profile(task, str(kernel) if kernel else None, shape_index, dtype)
    write_json(json_out, res)
    console.print(f"[bold]{task}[/] {res['shape']} {dtype}")
    console.print(res["digest"], markup=False)


@app.command("scan")
def scan_cmd(
    kernel: Path = typer.Option(..., "--kernel", help="Candidate .cu file."),
    task: str | None = typer.Option(None, "--task", help="Also compile with NVRTC (no GPU needed) and audit the PTX."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON also when clean (`[]`)."),
) -> None:
    """Static anti-hack scan (no GPU): findings as a JSON list, or `clean`; with --task also the audit of the
    compiled PTX. Exit 1 when anything is found."""
    from triforge.astra.scan import scan

    source = _read_kernel(kernel) or ""
    found = [str(f) for f in scan(source)]
    if task is not None:
        from triforge.astra.check_host import audit_on_cpu
        from triforge.astra.task import get_task

        get_task(task)
        found += [str(f) for f in audit_on_cpu(task, source)]
    # machine-readable output goes straight to stdout, never through the terminal library's wrapping
    sys.stdout.write((json.dumps(found, indent=2) if found or json_out else "clean") + "\n")
    sys.stdout.flush()
    raise typer.Exit(1 if found else 0)


def _register_optimize() -> None:
    from triforge.cli import astra_optimize

    app.command("optimize")(astra_optimize.optimize)
    app.command("evaluate")(astra_optimize.evaluate)


_register_optimize()
