"""The device's achievable DRAM bandwidth, measured with the lab's own vectorised kernels: a ceiling.

torch's device-to-device `copy_` is not one (torch.compile's kernels beat it by 9-20% on an H100), so
the lab times its own streaming kernels: 16-byte loads and stores, `U` independent 16-byte loads in
flight per thread before their stores, over several block sizes, unroll depths and grid sizes, on
1 GiB in and 1 GiB out, and keeps the best. A read-only variant (16-byte loads folded into a value
that is stored once per thread) gives the read ceiling. The achievable bandwidth is the larger of the
two; kernels are reported as a fraction of it beside the datasheet peak (memory clock x bus width),
and one that beats it by more than noise is implausible.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

PROBE_BYTES = 1 << 30
UNROLLS = (1, 2, 4, 8)

SOURCE = r"""
template <int U>
__global__ void stream_copy(const uint4* __restrict__ src, uint4* __restrict__ dst, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x * U;
  for (long long base = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; base < n; base += stride) {
    uint4 r[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const long long k = base + (long long)j * blockDim.x;
      if (k < n) r[j] = src[k];
    }
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const long long k = base + (long long)j * blockDim.x;
      if (k < n) dst[k] = r[j];
    }
  }
}

template <int U>
__global__ void stream_read(const uint4* __restrict__ src, unsigned int* __restrict__ sink, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x * U;
  unsigned int acc = 0;
  for (long long base = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; base < n; base += stride) {
    uint4 r[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const long long k = base + (long long)j * blockDim.x;
      r[j] = k < n ? src[k] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < U; ++j) acc ^= r[j].x ^ r[j].y ^ r[j].z ^ r[j].w;
  }
  sink[(long long)blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""


@dataclass(frozen=True)
class Config:
    block: int
    unroll: int
    blocks_per_sm: int  # 0: one pass, a thread per U vectors (no grid-stride loop)

    def label(self) -> str:
        per = "one pass" if self.blocks_per_sm == 0 else f"{self.blocks_per_sm} blocks/SM"
        return f"block {self.block}, {self.unroll} x 16 B in flight, {per}"


CONFIGS = (Config(256, 4, 8), Config(512, 2, 4), Config(1024, 1, 2), Config(256, 8, 4), Config(128, 4, 16),
           Config(512, 4, 4), Config(256, 1, 0), Config(256, 4, 0))


@dataclass
class Roofline:
    copy_gbs: float       # best read + write bandwidth (bytes read plus bytes written per second)
    read_gbs: float       # best read-only bandwidth
    copy_config: str
    read_config: str
    peak_gbs: float       # the datasheet figure: memory clock x bus width
    tried: list[dict[str, Any]] = field(default_factory=list)

    @property
    def achievable_gbs(self) -> float:
        return max(self.copy_gbs, self.read_gbs)


def grid_for(cfg: Config, n_vec: int, sms: int) -> int:
    if cfg.blocks_per_sm == 0:
        return -(-n_vec // (cfg.block * cfg.unroll))
    return sms * cfg.blocks_per_sm


def best(times_us: dict[str, list[float]], nbytes: int) -> tuple[str, float]:
    """(label, GB/s) of the configuration with the lowest median time."""
    label, ts = min(times_us.items(), key=lambda kv: statistics.median(kv[1]))
    return label, nbytes / (statistics.median(ts) * 1e-6) / 1e9


def measure(peak_gbs: float, nbytes: int = PROBE_BYTES, reps: int = 10) -> Roofline:
    """Time every configuration of both kernels (after a warm-up each) and keep the best of each."""
    import torch

    from triforge.astra import gpu
    from triforge.astra.compile import nvrtc_compile

    names = [f"stream_{k}<{u}>" for k in ("copy", "read") for u in UNROLLS]
    res = nvrtc_compile(SOURCE, names, arch=gpu.device_arch())
    if not res.ok:
        raise RuntimeError(f"the bandwidth probe does not compile:\n{res.log[-2000:]}")
    cu = gpu.driver()
    err, module = cu.cuModuleLoadData(res.cubin)
    gpu.check(err, "cuModuleLoadData")
    fns = {}
    for name in names:
        err, fn = cu.cuModuleGetFunction(module, res.lowered[name].encode())
        gpu.check(err, f"cuModuleGetFunction({name})")
        fns[name] = fn
    n_vec = nbytes // 16
    src = torch.ones(nbytes // 4, dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sink = torch.empty(max(grid_for(c, n_vec, sms) * c.block for c in CONFIGS), dtype=torch.int32, device="cuda")
    stream = cu.CUstream(torch.cuda.current_stream().cuda_stream)
    copy_t: dict[str, list[float]] = {}
    read_t: dict[str, list[float]] = {}
    tried = []
    import ctypes

    for cfg in CONFIGS:
        grid = grid_for(cfg, n_vec, sms)
        for kind, out_t, second in (("copy", copy_t, dst), ("read", read_t, sink)):
            fn = fns[f"stream_{kind}<{cfg.unroll}>"]
            args = ((src.data_ptr(), second.data_ptr(), n_vec), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong))
            times = []
            for r in range(reps + 2):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                gpu.check(cu.cuLaunchKernel(fn, grid, 1, 1, cfg.block, 1, 1, 0, stream, args, 0)[0], "cuLaunchKernel")
                e.record()
                e.synchronize()
                if r >= 2:
                    times.append(s.elapsed_time(e) * 1000.0)
            out_t[cfg.label()] = times
            moved = 2 * nbytes if kind == "copy" else nbytes
            tried.append({"kernel": kind, "config": cfg.label(), "median_us": statistics.median(times),
                          "gbs": moved / (statistics.median(times) * 1e-6) / 1e9})
    if not torch.equal(dst[:1024], src[:1024]):
        raise RuntimeError("the bandwidth probe's copy is wrong")
    c_label, c_gbs = best(copy_t, 2 * nbytes)
    r_label, r_gbs = best(read_t, nbytes)
    cu.cuModuleUnload(module)
    del src, dst, sink
    torch.cuda.empty_cache()
    return Roofline(c_gbs, r_gbs, c_label, r_label, peak_gbs, tried)
