"""Comparator table (runs in the worker): baseline, candidate, PyTorch eager, torch.compile, FlashInfer."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from triforge.astra import flashinfer_headers
from triforge.astra.candidate import Candidate
from triforge.astra.evaluate import _compile_load, baseline_kernel
from triforge.astra.oracle import compare
from triforge.astra.task import TaskSpec, get_task, shape_label
from triforge.astra.timing import (
    aa_spread,
    device,
    floor_us,
    graph_replay_us,
    graph_sets,
    interleaved,
    io_bytes,
)


def copy_gbs() -> float:
    """The measured device-to-device copy bandwidth, once per process."""
    return device().copy_gbs


def _flashinfer_available() -> bool:
    try:
        import flashinfer  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means absent
        return False
    return True


def comparators(task: TaskSpec, source: str | None, use_compile: bool,
                flashinfer_lib: str | None = None) -> tuple[list[tuple[str, Any]], list[str]]:
    """(name, make(shape, dtype) -> (launch(inputs), make_graph_launch(stream)))."""
    import torch

    notes = []
    base = baseline_kernel(task)

    def kern(k):
        return lambda shape, dt: (k.launcher(shape, dt), lambda stream: k.launcher(shape, dt, stream))

    def torch_fn(fn: Callable):
        return lambda shape, dt: (fn, lambda stream: fn)

    out: list[tuple[str, Any]] = [("baseline", kern(base)), ("baseline A/A", kern(base))]
    if source is not None:
        res, cand = _compile_load(task, Candidate.from_source(source), False)
        if cand is None:
            raise RuntimeError(f"candidate does not compile: {res.log[-2000:]}")
        out.append(("candidate", kern(cand)))
    out.append(("torch eager", torch_fn(task.eager)))
    if use_compile:
        out.append(("torch.compile", torch_fn(torch.compile(task.eager))))
    if task.flashinfer is not None and _flashinfer_available():
        out.append(("flashinfer", torch_fn(task.flashinfer)))
    elif flashinfer_lib is not None and task.name in flashinfer_headers.TASKS:
        make = flashinfer_headers.kernels(flashinfer_lib)[task.name]
        out.append(("flashinfer (headers)", lambda shape, dt: (make(), make)))
    elif task.flashinfer is not None:
        notes.append("flashinfer: not installed (pip install flashinfer-python, or give its headers: "
                     "--flashinfer-include), column left out")
    return out, notes


def _verify(task: TaskSpec, fn, shape, dtype: str, seed: int) -> str:
    inputs = task.make_inputs(shape, dtype, seed)
    ref = task.reference(inputs, dtype)
    fn(inputs)
    reasons = []
    for k in task.written:
        reasons += task.compare[k](inputs[k], ref[k]) if k in task.compare else compare(
            k, inputs[k], ref[k], task.tol(k, dtype), False)
    return "ok" if not reasons else reasons[0][:120]


def bench_task(task_name: str, source: str | None = None, runs: int = 100, dtype: str = "bf16",
               use_compile: bool = True, graph: bool = True, seed: int = 99, target_noise: float = 0.01,
               max_rounds: int = 3, flashinfer_lib: str | None = None) -> dict[str, Any]:
    """Every comparator on every timing shape, interleaved on fresh inputs with the L2 flushed.

    Each shape states its noise (the A/A spread of the baseline timed twice); a shape whose spread is
    above `target_noise` is timed again with twice the runs, up to `max_rounds` times. A speedup within
    three times the noise is marked as such; a time below the physical floor is marked implausible."""
    import torch

    task = get_task(task_name)
    dev = device()
    bw = dev.copy_gbs
    comps, notes = comparators(task, source, use_compile, flashinfer_lib)
    rows = []
    for si, shape in enumerate(task.timing):
        made = [(name, make(shape, dtype)) for name, make in comps]
        checked = {name: _verify(task, fns[0], shape, dtype, seed + 7 + si) for name, fns in made}
        n = runs * (3 if task.min_bytes(shape, dtype) < 16 << 20 else 1)

        def fresh(r: int, shape=shape, si=si) -> dict[str, Any]:
            return task.make_inputs(shape, dtype, seed * 1_000_003 + si * 100_000 + r)

        for attempt in range(max_rounds):
            times = interleaved([fns[0] for _, fns in made], fresh, runs=n, outputs=tuple(task.outputs))
            aa = aa_spread(times[0], times[1])
            if aa <= target_noise or attempt == max_rounds - 1:
                break
            n *= 2
        probe = fresh(-1)
        nbytes = task.min_bytes(shape, dtype)
        floor = floor_us(*io_bytes(task, shape, dtype, probe), dev)
        floor_ach = floor_us(*io_bytes(task, shape, dtype, probe), dev, dev.achievable_gbs or dev.copy_gbs)
        base_med = statistics.median(times[0])
        for (name, fns), ts in zip(made, times, strict=True):
            med = statistics.median(ts)
            speedup = base_med / med
            row = {"task": task.name, "shape": shape_label(shape), "dtype": dtype, "comparator": name,
                   "median_us": med, "gbs": nbytes / (med * 1e-6) / 1e9, "copy_fraction": nbytes / (med * 1e-6) / 1e9 / bw,
                   "speedup_vs_baseline": speedup, "verified": checked[name], "runs": len(ts), "aa_spread": aa,
                   "within_noise": abs(speedup - 1.0) <= 3 * aa, "floor_us": floor, "plausible": med >= 0.97 * floor,
                   "roofline_fraction": floor_ach / med, "peak_fraction": floor / med}
            if not row["plausible"]:
                notes.append(f"{name} on {row['shape']}: {med:.2f} us is below the physical floor of {floor:.2f} us")
            elif row["roofline_fraction"] > 1.0 + max(3 * aa, 0.05):
                row["plausible"] = False
                notes.append(f"{name} on {row['shape']}: {med:.2f} us is {100 * (row['roofline_fraction'] - 1):.0f}% "
                             f"past the achievable bandwidth ({dev.achievable_gbs:.0f} GB/s)")
            if graph:
                try:
                    row["graph_us"] = graph_replay_us(fns[1], graph_sets(fresh, nbytes), outputs=tuple(task.outputs),
                                                      inplace=tuple(task.inplace))
                except Exception as exc:  # noqa: BLE001 - graph capture is optional
                    row["graph_us"] = None
                    notes.append(f"{name}: graph capture failed ({type(exc).__name__})")
                    torch.cuda.synchronize()
            rows.append(row)
        shape_rows = rows[-len(made):]
        if graph and shape_rows[0].get("graph_us") and shape_rows[1].get("graph_us"):
            g_aa = abs(shape_rows[0]["graph_us"] / shape_rows[1]["graph_us"] - 1.0)
            for r in shape_rows:
                r["graph_aa_spread"] = g_aa
                r["graph_speedup"] = shape_rows[0]["graph_us"] / r["graph_us"] if r.get("graph_us") else None
                r["graph_within_noise"] = r["graph_speedup"] is None or abs(r["graph_speedup"] - 1.0) <= 3 * g_aa
        if aa > target_noise:
            notes.append(f"{shape_label(shape)}: A/A spread {100 * aa:.2f}% after {n} runs is above "
                         f"{100 * target_noise:.0f}%; graph replay times (warm L2) are steadier there")
        del probe
    return {"task": task.name, "copy_gbs": bw, "peak_gbs": dev.peak_gbs, "l2_bytes": dev.l2_bytes, "rows": rows,
            "achievable_gbs": dev.achievable_gbs, "achievable_note": dev.achievable_note,
            "notes": sorted(set(notes)), "device": torch.cuda.get_device_name(), "torch": torch.__version__}
