"""Honest timing: L2 flushed, inputs nobody has seen before every call, callables interleaved, medians,
A/A noise, graphs, and the physical floor no honest kernel can beat.

Every timed call gets inputs generated on the GPU from a fresh seed just before it (the callables of
one round share that seed, each on its own newly made tensors), so no kernel can memoize an answer or
find last call's output waiting in its buffer; then the L2 is flushed and CUDA events bracket the call
alone. A callback sees every call's inputs and outputs, which lets the caller verify each of them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from triforge.astra.gpu import device_attribute
from triforge.astra.tensor_bits import poison


def flush_bytes() -> int:
    """What evicts the L2: four times its size (at least 64 MB). benchmarks/astra_timing_budget.py checks on
    the device that a tensor the L2 held reads as slowly after this flush as after a 2 GiB write-and-read."""
    return max(4 * device_attribute("L2_CACHE_SIZE"), 64 << 20)


class L2Flush:
    """Evicts the L2 by reading a buffer four times its size, written once when made: every line the L2
    held (a timed call's inputs, its dirty outputs, written back here) gives way to a clean line of the
    buffer, so nothing cached and nothing left to write back reaches the next timed call. Reading only
    moves half the bytes of a write-then-read flush."""

    def __init__(self, nbytes: int | None = None) -> None:
        import torch

        self.buf = torch.ones((nbytes or flush_bytes()) // 4, dtype=torch.float32, device="cuda")

    def __call__(self) -> None:
        self.buf.sum()


def interleaved(fns: list[Callable[[dict[str, Any]], None]], make_inputs: Callable[[int], dict[str, Any]],
                runs: int = 100, warmup: int = 10, flush: bool = True,
                after: Callable[[int, int, dict[str, Any]], None] | None = None,
                order: Callable[[int], list[int]] | None = None, outputs: tuple[str, ...] = ()) -> list[list[float]]:
    """Time each fn `runs` times, round-robin (A B C A B C ...), microseconds.

    Before every call `make_inputs(round)` makes new inputs (one seed per round, shared by the round's
    callables, so their outputs can be compared); `after(round, j, inputs)` runs after fn j's call,
    outside the timed window (rounds < 0 are warm-ups). `order(round)`: the callables' order in that
    round (default: a rotation, so no callable always follows the same one). The `outputs` of every call's
    inputs are poisoned before it, outside the timed window: a fresh tensor may reuse memory that held an
    earlier call's answer, and a kernel must never find one there."""
    import torch


    flusher = L2Flush() if flush else None
    n = len(fns)
    starts = [[torch.cuda.Event(enable_timing=True) for _ in range(runs)] for _ in range(n)]
    ends = [[torch.cuda.Event(enable_timing=True) for _ in range(runs)] for _ in range(n)]
    for r in range(-warmup, runs):
        for j in (order(r) if order is not None else [(k + r) % n for k in range(n)]):
            fn = fns[j]
            inputs = make_inputs(r)
            for k in outputs:
                poison(inputs[k])
            if flusher is not None:
                flusher()
            if r < 0:
                fn(inputs)
            else:
                starts[j][r].record()
                fn(inputs)
                ends[j][r].record()
            if after is not None:
                after(r, j, inputs)
    torch.cuda.synchronize()
    return [[s.elapsed_time(e) * 1000.0 for s, e in zip(starts[j], ends[j], strict=True)] for j in range(n)]


def host_vs_events(fn: Callable[[dict[str, Any]], None], inputs: dict[str, Any], calls: int = 50) -> tuple[float, float]:
    """Back-to-back calls on one buffer set: (host wall per call, event time per call), microseconds."""
    import torch

    fn(inputs)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    s.record()
    for _ in range(calls):
        fn(inputs)
    e.record()
    torch.cuda.synchronize()
    host = (time.perf_counter() - t0) * 1e6 / calls
    return host, s.elapsed_time(e) * 1000.0 / calls


GRAPH_BYTES_BUDGET = 2 << 30


def graph_sets(make_inputs: Callable[[int], dict[str, Any]], set_bytes: int, per_graph: int = 20) -> list[dict[str, Any]]:
    """Distinct input sets for one graph, one per captured launch (fewer for big shapes, at least 2)."""
    k = max(2, min(per_graph, GRAPH_BYTES_BUDGET // max(1, set_bytes)))
    return [make_inputs(i) for i in range(k)]


def graph_replay_us(make_launch: Callable[[int], Callable[[dict[str, Any]], None]],
                    inputs: dict[str, Any] | list[dict[str, Any]], per_graph: int = 20, replays: int = 20,
                    outputs: tuple[str, ...] = (), inplace: tuple[str, ...] = ()) -> float:
    """Time per call from replaying a CUDA graph of one launch per input set (warm L2 where the sets fit).

    Every captured launch has buffers of its own, and before every replay (outside the timed span) the
    `outputs` are poisoned and the `inplace` tensors restored, so no replayed call finds its answer
    waiting in its output. A single dict is cloned into `per_graph` sets. After the last replay each set
    holds that replay's results (for the caller to verify)."""
    import torch


    sets = inputs if isinstance(inputs, list) else [
        {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()} for _ in range(per_graph)]
    saved = [{k: s[k].clone() for k in inplace} for s in sets]

    def prepare() -> None:
        for s, keep in zip(sets, saved, strict=True):
            for k in outputs:
                if k in s:
                    poison(s[k])
            for k, v in keep.items():
                s[k].copy_(v)

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn = make_launch(stream.cuda_stream)
        for s in sets:
            fn(s)
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for s in sets:
                fn(s)
    prepare()
    graph.replay()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    for r in range(replays):
        prepare()
        starts[r].record()
        graph.replay()
        ends[r].record()
    torch.cuda.synchronize()
    total_ms = sum(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
    return total_ms * 1000.0 / (replays * len(sets))


def copy_bandwidth_gbs(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy bandwidth (bytes read + written per second), median of 10, GB/s."""
    import torch

    a = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.fill_(1)
    times = []
    for _ in range(12):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1000.0)
    return nbytes / statistics.median(times[2:]) / 1e9


def aa_spread(a: list[float], b: list[float]) -> float:
    """|median(a) / median(b) - 1| for the same kernel timed twice, interleaved."""
    return abs(statistics.median(a) / statistics.median(b) - 1.0)


@dataclass(frozen=True)
class Device:
    """What bounds an honest kernel on this GPU: peak DRAM bandwidth (from the memory clock and bus
    width), the L2 size, torch's device-to-device copy bandwidth (read + write; a yardstick, not a
    ceiling), and the achievable bandwidth the lab's own streaming kernels reach (`roofline`)."""

    name: str
    peak_gbs: float
    l2_bytes: int
    copy_gbs: float
    achievable_gbs: float = 0.0
    achievable_note: str = ""


_DEVICE: list[Device] = []


def device() -> Device:
    if not _DEVICE:
        import torch

        clock_khz = device_attribute("MEMORY_CLOCK_RATE")
        bus_bits = device_attribute("GLOBAL_MEMORY_BUS_WIDTH")
        l2 = device_attribute("L2_CACHE_SIZE")
        peak = 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9
        copy = copy_bandwidth_gbs()
        try:
            from triforge.astra.roofline import measure

            roof = measure(peak)
            achievable, note = roof.achievable_gbs, (f"copy {roof.copy_gbs:.0f} GB/s ({roof.copy_config}), "
                                                     f"read {roof.read_gbs:.0f} GB/s ({roof.read_config})")
        except Exception as exc:  # noqa: BLE001 - the probe is a measurement; without it, torch's copy stands in
            achievable, note = copy, f"probe failed ({type(exc).__name__}: {str(exc)[:200]}); torch's copy used"
        _DEVICE.append(Device(torch.cuda.get_device_name(), peak, l2, copy, achievable, note))
    return _DEVICE[0]


def floor_us(read_bytes: int, write_bytes: int, dev: Device, gbs: float | None = None) -> float:
    """The least time any kernel needs: the L2 is flushed before the call, so every input byte comes
    from DRAM, and written bytes beyond what the L2 can hold must reach DRAM too (at peak bandwidth,
    or at `gbs`)."""
    return (read_bytes + max(0, write_bytes - dev.l2_bytes)) / ((gbs or dev.peak_gbs) * 1e9) * 1e6


def io_bytes(task, shape, dtype: str, inputs: dict[str, Any]) -> tuple[int, int]:
    """(bytes an honest kernel must read, bytes it must write): the written tensors' sizes, and the
    task's minimum traffic less the written tensors (in-place tensors are both read and written)."""
    written = sum(int(inputs[k].numel() * inputs[k].element_size()) for k in task.written)
    return task.min_bytes(shape, dtype) - written, written
