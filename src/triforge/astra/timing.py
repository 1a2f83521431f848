"""Honest timing: L2 flushed, fresh buffers every call, callables interleaved, medians, A/A noise, graphs.

Each timed callable takes a buffer set. Before every timed call the set's inputs are refreshed from
one of several pristine random sets (a different one each call, on alternating buffers), the L2 is
flushed with a large write, and CUDA events bracket the call alone.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

L2_FLUSH_BYTES = 512 << 20


@dataclass
class TimingStats:
    median_us: float
    p10_us: float
    p90_us: float
    runs: int

    @classmethod
    def of(cls, xs: list[float]) -> TimingStats:
        s = sorted(xs)
        return cls(statistics.median(s), s[len(s) // 10], s[(len(s) * 9) // 10], len(s))


class BufferPool:
    """Pristine input sets and working sets for one (task, shape, dtype)."""

    def __init__(self, task, shape, dtype: str, seed: int, pristine: int = 3, working: int = 2) -> None:
        from triforge.astra.oracle import tensors

        self.task = task
        self.pristine = [task.make_inputs(shape, dtype, seed + i) for i in range(pristine)]
        self.working = [task.make_inputs(shape, dtype, seed + 100 + i) for i in range(working)]
        self.names = [k for k in tensors(self.pristine[0]) if k not in task.outputs]
        self.counts: dict[int, int] = {}
        self.last: dict[int, tuple[int, int]] = {}

    def next(self, who: int = 0) -> dict[str, Any]:
        """Refresh a working set from a pristine set (both alternate) for caller `who` and return it.

        Each caller alternates over the working sets (and consecutive calls never reuse a pristine
        set), so buffer placement cannot favour one of the callers that share a pool."""
        i = self.counts.get(who, 0)
        self.counts[who] = i + 1
        w, p = (i + who) % len(self.working), (2 * i + who + 1) % len(self.pristine)
        for k in self.names:
            self.working[w][k].copy_(self.pristine[p][k])
        self.last[who] = (w, p)
        return self.working[w]

    def last_output(self, who: int, name: str):
        return self.working[self.last[who][0]][name]

    def expected_last(self, who: int) -> dict[str, Any]:
        """Reference outputs for the inputs of `who`'s most recent call (for the stale-output check)."""
        return self.task.reference(self.pristine[self.last[who][1]], None)


class L2Flush:
    """Evicts the L2: writes a large buffer, then reads it back, so no dirty line of the flush is left
    to be written back inside the timed call and no input stays cached."""

    def __init__(self) -> None:
        import torch

        self.buf = torch.zeros(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")

    def __call__(self) -> None:
        self.buf.zero_()
        self.buf.sum()


def interleaved(fns: list[Callable[[dict[str, Any]], None]], pools: list[BufferPool], runs: int = 100,
                warmup: int = 10, flush: bool = True) -> list[list[float]]:
    """Time each fn `runs` times, round-robin (A B C A B C ...), each call on fresh buffers; microseconds."""
    import torch

    flusher = L2Flush() if flush else None
    n = len(fns)
    starts = [[torch.cuda.Event(enable_timing=True) for _ in range(runs)] for _ in range(n)]
    ends = [[torch.cuda.Event(enable_timing=True) for _ in range(runs)] for _ in range(n)]
    for r in range(warmup + runs):
        for j, fn in enumerate(fns):
            inputs = pools[j].next(j)
            if flusher is not None:
                flusher()
            if r < warmup:
                fn(inputs)
                continue
            starts[j][r - warmup].record()
            fn(inputs)
            ends[j][r - warmup].record()
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


def graph_replay_us(make_launch: Callable[[int], Callable[[dict[str, Any]], None]], inputs: dict[str, Any],
                    per_graph: int = 20, replays: int = 20) -> float:
    """Warm-L2 time per call from replaying a CUDA graph of `per_graph` launches on one buffer set."""
    import torch

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn = make_launch(stream.cuda_stream)
        fn(inputs)
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(per_graph):
                fn(inputs)
    graph.replay()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(replays):
        graph.replay()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1000.0 / (replays * per_graph)


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
