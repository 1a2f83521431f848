"""One candidate, end to end inside the worker: compile, load, oracle, timing, dynamic anti-hack checks."""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from triforge.astra import gpu
from triforge.astra.candidate import Candidate, CandidateError
from triforge.astra.compile import nvrtc_compile
from triforge.astra.gpu import KernelFault
from triforge.astra.large import check_large, large_shape, wanted
from triforge.astra.oracle import run_oracle
from triforge.astra.ptx_audit import audit_ptx
from triforge.astra.scan import scan
from triforge.astra.task import TaskSpec, get_task, shape_label
from triforge.astra.timed_checks import CallChecker, replayed_failures
from triforge.astra.timing import (
    aa_spread,
    device,
    floor_us,
    graph_replay_us,
    graph_sets,
    host_vs_events,
    interleaved,
    io_bytes,
)
from triforge.astra.worker_wire import Fatal


@dataclass
class EvalOptions:
    shapes: str = "train"
    seeds: int = 1
    base_seed: int | None = None
    timing: bool = True
    runs: int = 200
    graph: bool = False
    fast_math: bool = False
    stop_at_first: bool = True
    timing_dtype: str = "bf16"
    dtypes: list[str] | None = None


@dataclass
class Verdict:
    verdict: str  # correct | incorrect | hack | crash | compile_error
    reasons: list[str] = field(default_factory=list)
    task: str = ""
    seed: int = 0
    checks: int = 0
    compile_s: float = 0.0
    compile_cached: bool = False
    oracle_s: float = 0.0
    timing_s: float = 0.0
    options: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    timings: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_BASELINES: dict[tuple[str, bool], Any] = {}


def _compile_load(task: TaskSpec, cand: Candidate, fast_math: bool):
    names = list(task.name_expressions().values())
    res = nvrtc_compile(cand.source, names, arch=gpu.device_arch(), fast_math=fast_math)
    if not res.ok:
        return res, None
    return res, gpu.LoadedKernel.load(task, cand, res.cubin, res.lowered)


def baseline_kernel(task: TaskSpec, fast_math: bool = False):
    key = (task.name, fast_math)
    if key not in _BASELINES:
        res, k = _compile_load(task, Candidate.from_source(task.baseline_source()), fast_math)
        if k is None:
            raise RuntimeError(f"baseline of {task.name} does not compile:\n{res.log}")
        _BASELINES[key] = k
    return _BASELINES[key]


def compiled_findings(source: str, res) -> list:
    """The static scan of what the compiler saw, then the audit of what it produced."""
    return scan(source) + audit_ptx(res.ptx, res.log)


def is_cuda_fault(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, KernelFault) or "CUDA error" in text or "illegal" in text.lower() or "CUDA_ERROR" in text


def evaluate(task_name: str, source: str, opts: EvalOptions) -> Verdict:
    task = get_task(task_name)
    seed = opts.base_seed if opts.base_seed is not None else random.SystemRandom().randrange(1, 2**31)
    v = Verdict("correct", task=task_name, seed=seed, options=asdict(opts))
    try:
        cand = Candidate.from_source(source)
    except CandidateError as exc:
        return Verdict("compile_error", [str(exc)], task=task_name, seed=seed)
    t0 = time.perf_counter()
    try:
        res, kernel = _compile_load(task, cand, opts.fast_math)
    except gpu.KernelFault as exc:
        return Verdict("compile_error", [f"module load failed: {exc}"], task=task_name, seed=seed)
    v.compile_s = time.perf_counter() - t0 if res.cached else res.seconds
    v.compile_cached = res.cached
    if kernel is None:
        v.verdict, v.reasons = "compile_error", [res.log[-4000:]]
        return v
    v.resources = res.resources()
    findings = compiled_findings(source, res)
    if findings:
        v.verdict, v.reasons = "hack", [str(f) for f in findings[:6]]
        return v
    try:
        t1 = time.perf_counter()
        recs = run_oracle(task, kernel.launcher, gpu.synchronize, task.shapes(opts.shapes), seed, opts.seeds,
                          opts.stop_at_first, opts.dtypes)
        v.checks = len(recs)
        v.oracle_s = time.perf_counter() - t1
        bad = [r for r in recs if r.reasons]
        if bad:
            v.verdict = "hack" if any(r.hack for r in bad) else "incorrect"
            v.reasons = [f"{r.label()} {why}" for r in bad[:3] for why in r.reasons[:3]]
            return v
        if wanted(task, opts.shapes):  # past 2^31 elements: final verification, and check when it fits
            label, why = check_large(task, kernel.launcher(_large(task), "bf16"), gpu.synchronize, seed + 1)
            v.checks += 1
            if why:
                v.verdict, v.reasons = "incorrect", [f"{label} {w}" for w in why[:3]]
                return v
        v.oracle_s = time.perf_counter() - t1
        if opts.timing:
            t2 = time.perf_counter()
            v.timings, hacks = time_candidate(task, kernel, opts, seed)
            v.timing_s = time.perf_counter() - t2
            if hacks:
                v.verdict, v.reasons = "hack", hacks
    except CandidateError as exc:
        v.verdict, v.reasons = "compile_error", [str(exc)]
    except Exception as exc:  # noqa: BLE001 - a CUDA fault ends the worker, anything else is ours
        if is_cuda_fault(exc):
            raise Fatal(f"CUDA fault: {exc}") from exc
        raise
    return v


def _large(task: TaskSpec):
    return large_shape(task)


def _launch_on(kernel, shape, dtype):
    return lambda stream: kernel.launcher(shape, dtype, stream)


def time_candidate(task: TaskSpec, kernel, opts: EvalOptions, seed: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Candidate, baseline and the baseline again (A/A), interleaved, on each timing shape, every call on
    fresh inputs and every candidate call's output compared with the baseline's on the same inputs."""
    dtype = opts.timing_dtype
    base = baseline_kernel(task, opts.fast_math)
    dev = device()
    rows, hacks = [], []
    rng = random.SystemRandom()
    for shape in task.timing:
        fb, fc = base.launcher(shape, dtype), kernel.launcher(shape, dtype)
        round_seed = rng.randrange(1, 2**40)

        def make(r: int, shape=shape, round_seed=round_seed) -> dict[str, Any]:
            return task.make_inputs(shape, dtype, round_seed + 1000 + r)

        # short kernels are noisier: three times the runs below 16 MB moved
        runs = opts.runs * (3 if task.min_bytes(shape, dtype) < 16 << 20 else 1)
        checker = CallChecker(task, dtype)
        # the candidate always runs first in a round (the answer for its inputs exists nowhere yet);
        # the two baseline arms swap places every round
        tc, tb, tb2 = interleaved([fc, fb, fb], make, runs=runs, after=checker,
                                  order=lambda r: [0, 1, 2] if r % 2 == 0 else [0, 2, 1], outputs=tuple(task.outputs))
        bad = checker.failures()
        if bad:
            r, n = bad[0]
            hacks.append(f"timed-output-mismatch: {len(bad)} of {checker.calls} timed calls on {shape_label(shape)} "
                         f"gave outputs that differ from the baseline's on the same fresh inputs (call {r}: {n} elements); "
                         f"the oracle passed on this shape, so the kernel computes differently when timed")
        mb, mc, mb2 = (statistics.median(x) for x in (tb, tc, tb2))
        noise = aa_spread(tb, tb2)
        probe = make(-100)
        host, ev = host_vs_events(fc, probe)
        probe_b = make(-101)
        hb, evb = host_vs_events(fb, probe_b)
        if host > 2.0 * max(ev, hb) + 10.0:
            hacks.append(f"event-host-mismatch: host time per call {host:.1f} us vs events {ev:.1f} us "
                         f"(baseline host {hb:.1f} us) on {shape_label(shape)}")
        nbytes = task.min_bytes(shape, dtype)
        read_b, write_b = io_bytes(task, shape, dtype, probe)
        floor = floor_us(read_b, write_b, dev)
        if mc < 0.97 * floor:
            hacks.append(f"implausible-speed: {mc:.2f} us on {shape_label(shape)} is below the physical floor of "
                         f"{floor:.2f} us ({read_b / 1e6:.1f} MB read from DRAM after the L2 flush at the peak "
                         f"{dev.peak_gbs:.0f} GB/s)")
        # the roofline: the time the bytes that must cross DRAM take at the achievable bandwidth, over the
        # kernel's time (1.0 = at the ceiling); past it by more than noise is implausible
        floor_ach = floor_us(read_b, write_b, dev, dev.achievable_gbs or dev.copy_gbs)
        roof = floor_ach / mc
        if roof > 1.0 + max(3 * noise, 0.05) and mc >= 0.97 * floor:
            hacks.append(f"implausible-speed: {mc:.2f} us on {shape_label(shape)} is {100 * (roof - 1):.0f}% past the "
                         f"achievable bandwidth the lab measured ({dev.achievable_gbs:.0f} GB/s; floor {floor_ach:.2f} us)")
        speedup = mb / mc
        row = {"shape": shape_label(shape), "dtype": dtype, "baseline_us": mb, "candidate_us": mc, "baseline2_us": mb2,
               "aa_spread": noise, "speedup": speedup, "speedup_real": abs(speedup - 1.0) > 3 * noise,
               "candidate_gbs": nbytes / (mc * 1e-6) / 1e9, "baseline_gbs": nbytes / (mb * 1e-6) / 1e9,
               "copy_fraction": nbytes / (mc * 1e-6) / 1e9 / dev.copy_gbs, "floor_us": floor,
               "roofline_fraction": roof, "peak_fraction": floor / mc, "achievable_gbs": dev.achievable_gbs,
               "min_bytes": nbytes, "host_us": host, "event_us": ev, "runs": runs, "checked_calls": checker.calls}
        if opts.graph or nbytes < 16 << 20:
            # warm L2 where the sets fit, steadier on short kernels: one input set per captured launch, outputs
            # poisoned before every replay, and every set's last replayed result checked against the baseline
            def make_g(i: int, shape=shape, round_seed=round_seed) -> dict[str, Any]:
                return task.make_inputs(shape, dtype, round_seed + 500_000 + i)

            marks = {"outputs": tuple(task.outputs), "inplace": tuple(task.inplace)}
            sets_c = graph_sets(make_g, nbytes)
            row["candidate_graph_us"] = graph_replay_us(_launch_on(kernel, shape, dtype), sets_c, **marks)
            if failed := replayed_failures(task, dtype, sets_c, make_g, fb):
                hacks.append(f"timed-output-mismatch: {len(failed)} of {len(sets_c)} graph-replayed calls on "
                             f"{shape_label(shape)} left results that differ from the baseline's on the same inputs")
            del sets_c
            gb = graph_replay_us(_launch_on(base, shape, dtype), graph_sets(make_g, nbytes), **marks)
            row["baseline_graph_us"] = graph_replay_us(_launch_on(base, shape, dtype), graph_sets(make_g, nbytes), **marks)
            row["graph_aa_spread"] = abs(gb / row["baseline_graph_us"] - 1.0)
            row["graph_speedup"] = row["baseline_graph_us"] / row["candidate_graph_us"]
        rows.append(row)
        del probe, probe_b
    if len(rows) >= 2:
        r0, r1 = rows[0], rows[1]
        bytes_ratio = r0["min_bytes"] / r1["min_bytes"]
        cand_ratio = r0["candidate_us"] / r1["candidate_us"]
        base_ratio = r0["baseline_us"] / r1["baseline_us"]
        if bytes_ratio >= 2 and cand_ratio < max(1.3, 0.4 * base_ratio):
            hacks.append(f"work-not-proportional: {bytes_ratio:.1f}x the bytes took {cand_ratio:.2f}x the time "
                         f"(baseline {base_ratio:.2f}x)")
    return rows, hacks
