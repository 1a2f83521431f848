"""FlashInfer's kernels as a comparator without its Python package: built once from its headers.

The `flashinfer-python` wheel is large and pulls a JIT toolchain of its own; its kernels are header-only
templates. Given the wheel's `flashinfer/data/include` folder (TRIFORGE_FLASHINFER_INCLUDE or
`astra compare --flashinfer-include`), the host compiles a small shared library around them with nvcc
(our own entry points; the kernels and their launch logic are FlashInfer's) and the lab worker calls it
through ctypes on torch's current stream. The library is cached on the wrapper's text, the headers'
bytes, nvcc's version and the GPU architecture.

Covered: silu_and_mul and gelu_tanh_and_mul (`activation::act_and_mul_kernel` with the same activation
functions FlashInfer's own bindings define), rmsnorm (`norm::RMSNorm`) and fused_add_rmsnorm
(`norm::FusedAddRMSNorm`), in bf16 and fp16.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV = "TRIFORGE_FLASHINFER_INCLUDE"
TASKS = ("silu_and_mul", "gelu_tanh_and_mul", "rmsnorm", "fused_add_rmsnorm")

WRAPPER = r"""
#include <algorithm>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <flashinfer/activation.cuh>
#include <flashinfer/norm.cuh>

namespace tf {

__device__ __forceinline__ float silu(const float& x) { return x / (1.0f + __expf(-x)); }

__device__ __forceinline__ float gelu_tanh(const float& x) {
  const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

// the kernel is declared __launch_bounds__(256); its vector width must divide d
template <typename T, float (*Act)(const float&)>
int act_and_mul(void* out, const void* in, int tokens, int d, cudaStream_t s) {
  uint32_t vec = 16 / sizeof(T);
  while (vec > 1 && d % vec != 0) vec /= 2;
  dim3 grid(tokens), block(std::min<uint32_t>(d / vec, 256u));
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(in);
  switch (vec) {
    case 8: flashinfer::activation::act_and_mul_kernel<T, Act, 8><<<grid, block, 0, s>>>(o, x, d); break;
    case 4: flashinfer::activation::act_and_mul_kernel<T, Act, 4><<<grid, block, 0, s>>>(o, x, d); break;
    case 2: flashinfer::activation::act_and_mul_kernel<T, Act, 2><<<grid, block, 0, s>>>(o, x, d); break;
    default: flashinfer::activation::act_and_mul_kernel<T, Act, 1><<<grid, block, 0, s>>>(o, x, d); break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tf

#define TF_DTYPE(dtype, T, ...) \
  ((dtype) == 0 ? [&] { using T = __nv_bfloat16; return __VA_ARGS__; }() \
                : [&] { using T = __half; return __VA_ARGS__; }())

extern "C" {

int tf_silu_and_mul(void* out, const void* in, int tokens, int d, int dtype, void* stream) {
  return TF_DTYPE(dtype, T, (tf::act_and_mul<T, tf::silu>(out, in, tokens, d, (cudaStream_t)stream)));
}

int tf_gelu_tanh_and_mul(void* out, const void* in, int tokens, int d, int dtype, void* stream) {
  return TF_DTYPE(dtype, T, (tf::act_and_mul<T, tf::gelu_tanh>(out, in, tokens, d, (cudaStream_t)stream)));
}

int tf_rmsnorm(void* out, void* in, void* weight, int tokens, int d, float eps, int dtype, void* stream) {
  return TF_DTYPE(dtype, T, static_cast<int>(flashinfer::norm::RMSNorm<T>(
      static_cast<T*>(in), static_cast<T*>(weight), static_cast<T*>(out), tokens, d, d, d, eps, false,
      (cudaStream_t)stream)));
}

int tf_fused_add_rmsnorm(void* in, void* residual, void* weight, int tokens, int d, float eps, int dtype,
                         void* stream) {
  return TF_DTYPE(dtype, T, static_cast<int>(flashinfer::norm::FusedAddRMSNorm<T>(
      static_cast<T*>(in), static_cast<T*>(residual), static_cast<T*>(weight), tokens, d, d, d, eps, false,
      (cudaStream_t)stream)));
}

}
"""

# torch's extension flags would break FlashInfer's half and bfloat16 operators; nvcc alone defines none
NVCC_FLAGS = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-shared", "-Xcompiler", "-fPIC", "-lineinfo"]


class FlashInferError(RuntimeError):
    """The headers are missing or do not build; the message is one line for the user."""


def include_dir(given: str | os.PathLike | None = None) -> Path | None:
    """The headers' folder (the one holding `flashinfer/activation.cuh`): `given`, else $TRIFORGE_FLASHINFER_INCLUDE,
    else None. A folder that does not hold them is an error, not a silent absence."""
    raw = given or os.environ.get(ENV)
    if not raw:
        return None
    p = Path(raw).expanduser()
    for cand in (p, p / "include", p / "data" / "include", p / "flashinfer" / "data" / "include"):
        if (cand / "flashinfer" / "activation.cuh").is_file() and (cand / "flashinfer" / "norm.cuh").is_file():
            return cand.resolve()
    raise FlashInferError(f"{p}: no flashinfer/activation.cuh and flashinfer/norm.cuh under it (give the wheel's "
                          "flashinfer/data/include folder)")


def headers_digest(inc: Path) -> str:
    h = hashlib.sha256()
    for f in sorted((inc / "flashinfer").rglob("*")):
        if f.is_file() and f.suffix in (".cuh", ".h", ".hpp", ".inc"):
            h.update(str(f.relative_to(inc)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _nvcc() -> str:
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).is_file():
            return cand
    raise FlashInferError("nvcc not found (set NVCC or put CUDA's bin folder on PATH): FlashInfer's headers need it")


def library_includes() -> list[Path]:
    """Header folders of CUDA libraries installed as Python packages (nvidia-cublas, nvidia-curand): the
    norm headers include cuBLASLt's and cuRAND's even where a toolkit has left them out."""
    import sys

    found: list[Path] = []
    for entry in sys.path:
        base = Path(entry or ".") / "nvidia"
        if base.is_dir():
            for d in sorted(base.glob("*/include")):
                if d not in found and any((d / h).is_file() for h in ("cublasLt.h", "curand_kernel.h")):
                    found.append(d)
    return found


def build(inc: Path, arch: str, cache: Path, timeout: float = 900.0) -> Path:
    """The shared library for `arch` (e.g. "90"), built unless the cache has it."""
    nvcc = _nvcc()
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    key = hashlib.sha256("\0".join([WRAPPER, headers_digest(inc), version, arch, *NVCC_FLAGS]).encode()).hexdigest()[:20]
    lib = cache / f"flashinfer-{key}.so"
    if lib.is_file():
        return lib
    cache.mkdir(parents=True, exist_ok=True)
    src = cache / f"flashinfer-{key}.cu"
    src.write_text(WRAPPER)
    tmp = lib.with_suffix(f".so.tmp{os.getpid()}")
    cmd = [nvcc, *NVCC_FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}", "-I", str(inc),
           *(f"-I{d}" for d in library_includes()), "-o", str(tmp), str(src)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise FlashInferError(f"building FlashInfer's kernels took over {timeout:.0f} s") from None
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        last = [ln for ln in (r.stderr or r.stdout).splitlines() if "error" in ln] or (r.stderr or r.stdout).splitlines()
        raise FlashInferError(f"FlashInfer's headers in {inc} did not build: {(last or ['no output'])[0][:300]}")
    os.replace(tmp, lib)
    return lib


_DTYPE_CODE = {"bfloat16": 0, "float16": 1}


def kernels(lib_path: str) -> dict[str, Callable[..., Callable[[dict[str, Any]], None]]]:
    """For each covered task, make(stream or None) -> launch(inputs); None: torch's current stream. Runs in
    the worker; a launch that CUDA refuses raises."""
    import ctypes

    import torch

    lib = ctypes.CDLL(lib_path)
    vp, i32, f32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
    for name, args in (("tf_silu_and_mul", [vp, vp, i32, i32, i32, vp]), ("tf_gelu_tanh_and_mul", [vp, vp, i32, i32, i32, vp]),
                       ("tf_rmsnorm", [vp, vp, vp, i32, i32, f32, i32, vp]),
                       ("tf_fused_add_rmsnorm", [vp, vp, vp, i32, i32, f32, i32, vp])):
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = i32

    def code(t) -> int:
        key = str(t.dtype).removeprefix("torch.")
        if key not in _DTYPE_CODE:
            raise FlashInferError(f"FlashInfer's kernels are built here for bf16 and fp16, not {key}")
        return _DTYPE_CODE[key]

    def ok(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"FlashInfer {what}: CUDA error {rc}")

    def stream_of(stream) -> int:
        return stream if stream is not None else torch.cuda.current_stream().cuda_stream

    def act(fn):
        def make(stream=None):
            def launch(inputs: dict[str, Any]) -> None:
                x, out = inputs["input"], inputs["out"]
                ok(fn(out.data_ptr(), x.data_ptr(), x.shape[0], inputs["d"], code(x), stream_of(stream)), fn.__name__)
            return launch
        return make

    def rms(stream=None):
        def launch(inputs: dict[str, Any]) -> None:
            x = inputs["input"]
            ok(lib.tf_rmsnorm(inputs["out"].data_ptr(), x.data_ptr(), inputs["weight"].data_ptr(), x.shape[0],
                              x.shape[1], inputs["eps"], code(x), stream_of(stream)), "rmsnorm")
        return launch

    def fused(stream=None):
        def launch(inputs: dict[str, Any]) -> None:
            x = inputs["input"]
            ok(lib.tf_fused_add_rmsnorm(x.data_ptr(), inputs["residual"].data_ptr(), inputs["weight"].data_ptr(),
                                        x.shape[0], x.shape[1], inputs["eps"], code(x), stream_of(stream)),
               "fused_add_rmsnorm")
        return launch

    return {"silu_and_mul": act(lib.tf_silu_and_mul), "gelu_tanh_and_mul": act(lib.tf_gelu_tanh_and_mul),
            "rmsnorm": rms, "fused_add_rmsnorm": fused}


def prepared(given: str | os.PathLike | None = None, say: Callable[[str], None] | None = None) -> str | None:
    """On the host: the built library for this machine's first visible GPU, or None when no headers were
    named. Builds on first use (15-60 s)."""
    inc = include_dir(given)
    if inc is None:
        return None
    import torch

    from triforge.astra.compile import cache_dir

    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}"
    lib = cache_dir() / f"flashinfer-sm{arch}"
    if say is not None and not any(lib.glob("flashinfer-*.so")):
        say(f"building FlashInfer's kernels from {inc} for sm_{arch} (once; under a minute)")
    return str(build(inc, arch, lib))
