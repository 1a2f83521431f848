"""Comparator table (runs in the worker): baseline, candidate, PyTorch eager, torch.compile, FlashInfer."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from triforge.astra.task import TaskSpec, get_task, shape_label

_COPY_GBS: list[float] = []


def copy_gbs() -> float:
    from triforge.astra.timing import copy_bandwidth_gbs

    if not _COPY_GBS:
        _COPY_GBS.append(copy_bandwidth_gbs())
    return _COPY_GBS[0]


def _flashinfer_available() -> bool:
    try:
        import flashinfer  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means absent
        return False
    return True


def comparators(task: TaskSpec, source: str | None, use_compile: bool) -> tuple[list[tuple[str, Any]], list[str]]:
    """(name, make(shape, dtype) -> (launch(inputs), make_graph_launch(stream)))."""
    import torch

    from triforge.astra.candidate import Candidate
    from triforge.astra.evaluate import _compile_load, baseline_kernel

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
    if task.flashinfer is not None:
        if _flashinfer_available():
            out.append(("flashinfer", torch_fn(task.flashinfer)))
        else:
            notes.append("flashinfer: not installed (pip install flashinfer-python), column left out")
    return out, notes


def _verify(task: TaskSpec, fn, shape, dtype: str, seed: int) -> str:
    from triforge.astra.oracle import compare

    inputs = task.make_inputs(shape, dtype, seed)
    ref = task.reference(inputs, dtype)
    fn(inputs)
    reasons = []
    for k in task.written:
        reasons += task.compare[k](inputs[k], ref[k]) if k in task.compare else compare(
            k, inputs[k], ref[k], task.tol(k, dtype), False)
    return "ok" if not reasons else reasons[0][:120]


def bench_task(task_name: str, source: str | None = None, runs: int = 100, dtype: str = "bf16",
               use_compile: bool = True, graph: bool = True, seed: int = 99) -> dict[str, Any]:
    import torch

    from triforge.astra.timing import BufferPool, aa_spread, graph_replay_us, interleaved

    task = get_task(task_name)
    bw = copy_gbs()
    comps, notes = comparators(task, source, use_compile)
    rows = []
    for si, shape in enumerate(task.timing):
        made = [(name, make(shape, dtype)) for name, make in comps]
        checked = {name: _verify(task, fns[0], shape, dtype, seed + 7 + si) for name, fns in made}
        pool = BufferPool(task, shape, dtype, seed)
        n = runs * (3 if task.min_bytes(shape, dtype) < 16 << 20 else 1)
        times = interleaved([fns[0] for _, fns in made], [pool] * len(made), runs=n)
        nbytes = task.min_bytes(shape, dtype)
        base_med = statistics.median(times[0])
        for (name, fns), ts in zip(made, times, strict=True):
            med = statistics.median(ts)
            row = {"task": task.name, "shape": shape_label(shape), "dtype": dtype, "comparator": name,
                   "median_us": med, "gbs": nbytes / (med * 1e-6) / 1e9, "copy_fraction": nbytes / (med * 1e-6) / 1e9 / bw,
                   "speedup_vs_baseline": base_med / med, "verified": checked[name], "runs": len(ts)}
            if graph:
                try:
                    row["graph_us"] = graph_replay_us(fns[1], pool.working[0])
                except Exception as exc:  # noqa: BLE001 - graph capture is optional
                    row["graph_us"] = None
                    notes.append(f"{name}: graph capture failed ({type(exc).__name__})")
                    torch.cuda.synchronize()
            rows.append(row)
        aa = aa_spread(times[0], times[1])
        for r in rows[-len(made):]:
            r["aa_spread"] = aa
        del pool
    return {"task": task.name, "copy_gbs": bw, "rows": rows, "notes": sorted(set(notes)),
            "device": torch.cuda.get_device_name(), "torch": torch.__version__}
