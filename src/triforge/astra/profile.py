"""Profiling digest: ncu (clocks left alone) and ptxas numbers, condensed into text an agent can act on."""

from __future__ import annotations

import csv
import io
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from triforge.astra.check_host import _tool
from triforge.astra.compile import nvrtc_compile
from triforge.astra.task import get_task, shape_label
from triforge.confine import proc
from triforge.core.errors import UserError

SECTIONS = ["SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis", "WarpStateStats"]
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"

METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_pct_alt": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers": "launch__registers_per_thread",
    "smem_static": "launch__shared_mem_per_block_static",
    "smem_dynamic": "launch__shared_mem_per_block_dynamic",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "dram_read": "dram__bytes_read.sum",
    "dram_write": "dram__bytes_write.sum",
    "grid": "launch__grid_size",
    "block": "launch__block_size",
}


def _num(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (ValueError, AttributeError):
        return None


def parse_ncu_csv(text: str) -> dict[str, Any]:
    """First kernel row of `ncu --csv --page raw` as {metric: (value, unit)}."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        raise ValueError("ncu printed no metrics (was the kernel launched? is the GPU supported?)")
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, units, first = rows[0], rows[1], rows[2]
    return {h: (v, u) for h, u, v in zip(header, units, first, strict=False)}


_UNIT = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "nsecond": 1, "usecond": 1e3, "msecond": 1e6}


def _scaled(value: float | None, unit: str) -> float | None:
    """Bytes or nanoseconds from an ncu value and its unit."""
    return None if value is None else value * _UNIT.get(unit, 1)


def digest(raw: dict[str, Any], min_bytes: int, resources: dict[str, int] | None = None) -> tuple[dict[str, Any], str]:
    def get(key: str) -> float | None:
        name = METRICS[key]
        return _num(raw[name][0]) if name in raw else None

    dur = _scaled(get("duration_ns"), raw.get(METRICS["duration_ns"], ("", "nsecond"))[1])
    rd = _scaled(get("dram_read"), raw.get(METRICS["dram_read"], ("", "byte"))[1]) or 0.0
    wr = _scaled(get("dram_write"), raw.get(METRICS["dram_write"], ("", "byte"))[1]) or 0.0
    stalls = sorted(((k[len(STALL_PREFIX): -len(STALL_SUFFIX)], _num(v[0]) or 0.0) for k, v in raw.items()
                     if k.startswith(STALL_PREFIX) and k.endswith(STALL_SUFFIX) and "not_issued" not in k),
                    key=lambda kv: -kv[1])[:4]
    d = {"duration_us": dur / 1000 if dur else None, "dram_pct": get("dram_pct") or get("dram_pct_alt"),
         "sm_pct": get("sm_pct"), "occupancy_pct": get("occupancy_pct"), "registers": get("registers"),
         "smem_bytes": (get("smem_static") or 0) + (get("smem_dynamic") or 0), "l2_hit_pct": get("l2_hit_pct"),
         "dram_bytes": rd + wr, "min_bytes": min_bytes, "stalls": stalls, "grid": get("grid"), "block": get("block")}
    if resources:
        d.update({f"ptxas_{k}": v for k, v in resources.items()})
    lines = [f"time {d['duration_us']:.2f} us; grid {d['grid']:.0f} x block {d['block']:.0f}" if dur and d["grid"] else "time ?",
             f"DRAM throughput {d['dram_pct'] or 0:.1f}% of peak, SM throughput {d['sm_pct'] or 0:.1f}% of peak",
             f"achieved occupancy {d['occupancy_pct'] or 0:.1f}%; {d['registers'] or 0:.0f} registers/thread; "
             f"{d['smem_bytes']:.0f} B shared memory/block",
             f"L2 hit rate {d['l2_hit_pct'] or 0:.1f}%",
             f"DRAM bytes {d['dram_bytes'] / 1e6:.2f} MB against a minimum of {min_bytes / 1e6:.2f} MB "
             f"({d['dram_bytes'] / max(min_bytes, 1):.2f}x)"]
    if resources:
        lines.append(f"ptxas: {resources.get('registers', 0)} registers, {resources.get('stack', 0)} B stack, "
                     f"spills {resources.get('spill_stores', 0)} B stored / {resources.get('spill_loads', 0)} B loaded")
    if stalls:
        lines.append("top warp stalls (cycles per issued instruction): "
                     + ", ".join(f"{k} {v:.2f}" for k, v in stalls))
    hints = []
    if d["dram_bytes"] > 1.3 * min_bytes:
        hints.append("moves more bytes than the minimum: look for re-reads or uncoalesced access")
    if (d["dram_pct"] or 0) < 60 and (d["sm_pct"] or 0) < 60:
        hints.append("neither memory nor compute is busy: too little work in flight (occupancy, loads per thread) or launch-bound")
    if resources and resources.get("spill_stores", 0):
        hints.append("register spills: reduce live values or unroll less")
    if hints:
        lines.append("hints: " + "; ".join(hints))
    return d, "\n".join(lines)


def profile(task_name: str, kernel_path: str | None, timing_index: int = 0, dtype: str = "bf16",
            timeout: float = 300, gpu: str | None = None) -> dict[str, Any]:
    """ncu's digest of one launch; `gpu` (a CUDA_VISIBLE_DEVICES entry) keeps it off other candidates' GPUs."""
    task = get_task(task_name)
    ncu = _tool("ncu")
    if ncu is None:
        raise UserError("ncu (Nsight Compute) not found on PATH or under CUDA_HOME/bin")
    shape = task.timing[timing_index]
    with tempfile.TemporaryDirectory() as td:
        path = kernel_path or str(Path(td) / "baseline.cu")
        if kernel_path is None:
            Path(path).write_text(task.baseline_source())
        cmd = [ncu, "--clock-control", "none", "--csv", "--page", "raw", "--kernel-name", f"regex:{task.entry}",
               "--launch-count", "1", "--target-processes", "all",
               "--metrics", "dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct"]
        for s in SECTIONS:
            cmd += ["--section", s]
        cmd += [sys.executable, "-m", "triforge.astra.runner", "launch", "--task", task_name, "--kernel", path,
                "--timing-index", str(timing_index), "--dtype", dtype]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **({"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else {})}
        r = proc.run(cmd, timeout=timeout, env=env, output_limit=2_000_000)
    if not r.ok:
        raise UserError(f"ncu failed (exit {r.returncode}): {(r.stderr or r.stdout)[-600:]}")
    raw = parse_ncu_csv(r.stdout)
    resources = _ptxas_resources(task_name, Path(path).read_text() if kernel_path else task.baseline_source(), dtype)
    d, text = digest(raw, task.min_bytes(shape, dtype), resources)
    return {"task": task_name, "shape": shape_label(shape), "dtype": dtype, "metrics": d, "digest": text,
            "ncu_seconds": round(r.duration_s, 1)}


def _ptxas_resources(task_name: str, source: str, dtype: str) -> dict[str, int] | None:
    try:
        task = get_task(task_name)
        names = task.name_expressions()
        res = nvrtc_compile(source, list(names.values()), use_cache=False)
        per = res.resources()
        low = res.lowered.get(names[dtype], "")
        return per.get(low) or next(iter(per.values()), None)
    except Exception:  # noqa: BLE001 - the digest works without ptxas numbers
        return None
