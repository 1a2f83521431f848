"""Loading a compiled candidate and launching it on torch tensors through the CUDA driver API."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from triforge.astra.candidate import Candidate, Launch, resolve_launch
from triforge.astra.task import ELEM_SIZE, TaskSpec

_KIND = {"ptr": ctypes.c_void_p, "i32": ctypes.c_int, "i64": ctypes.c_longlong, "f32": ctypes.c_float}


class KernelFault(Exception):
    """A CUDA error during or after a launch (illegal address, launch failure): the context is gone."""


def driver():
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        from cuda import cuda as cu  # type: ignore[no-redef]
    return cu


def check(err: Any, what: str) -> None:
    if int(err) != 0:
        cu = driver()
        _, name = cu.cuGetErrorName(err)
        raise KernelFault(f"{what}: {name.decode() if isinstance(name, bytes) else name}")


def init_context() -> None:
    import torch

    torch.cuda.init()
    torch.empty(1, device="cuda")  # makes the primary context current on this thread
    cu = driver()
    check(cu.cuInit(0)[0], "cuInit")


_READY: list[bool] = []


def ensure_context() -> None:
    """Initialise CUDA once per process (the worker does this lazily, on its first GPU job)."""
    if not _READY:
        init_context()
        _READY.append(True)


def device_attribute(name: str, ordinal: int = 0) -> int:
    """A CUdevice_attribute by its short name (e.g. MEMORY_CLOCK_RATE, in kHz)."""
    cu = driver()
    err, dev = cu.cuDeviceGet(ordinal)
    check(err, "cuDeviceGet")
    err, value = cu.cuDeviceGetAttribute(getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}"), dev)
    check(err, f"cuDeviceGetAttribute({name})")
    return int(value)


def device_arch() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def shape_env(shape: dict[str, int], dtype: str) -> dict[str, int]:
    env = dict(shape)
    env["elem_size"] = ELEM_SIZE[dtype]
    env["vec"] = 16 // ELEM_SIZE[dtype]
    return env


@dataclass
class LoadedKernel:
    """One compiled candidate: a function per dtype, the launch rule, the task's parameter list."""

    task: TaskSpec
    candidate: Candidate
    functions: dict[str, Any]
    module: Any

    @classmethod
    def load(cls, task: TaskSpec, candidate: Candidate, cubin: bytes, lowered: dict[str, str]) -> LoadedKernel:
        cu = driver()
        err, module = cu.cuModuleLoadData(cubin)
        check(err, "cuModuleLoadData")
        funcs = {}
        for dt, expr in task.name_expressions().items():
            err, fn = cu.cuModuleGetFunction(module, lowered[expr].encode())
            check(err, f"cuModuleGetFunction({expr})")
            funcs[dt] = fn
        return cls(task, candidate, funcs, module)

    def launch_for(self, shape: dict[str, int], dtype: str) -> Launch:
        return resolve_launch(self.candidate.launch_exprs, self.task.default_launch, shape_env(shape, dtype))

    def args(self, inputs: dict[str, Any]) -> tuple[tuple, tuple]:
        vals, kinds = [], []
        for p in self.task.params:
            v = inputs[p.name]
            vals.append(v.data_ptr() if p.kind == "ptr" else (float(v) if p.kind == "f32" else int(v)))
            kinds.append(_KIND[p.kind])
        return tuple(vals), tuple(kinds)

    def launcher(self, shape: dict[str, int], dtype: str, stream: int = 0):
        """A zero-argument-per-call launcher: `fn(inputs)` launches once on `stream`, no sync."""
        cu = driver()
        lc = self.launch_for(shape, dtype)
        fn = self.functions[dtype]
        if lc.smem > 48 * 1024:
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(cu.cuFuncSetAttribute(fn, attr, lc.smem)[0], "cuFuncSetAttribute")
        hstream = cu.CUstream(stream)

        def go(inputs: dict[str, Any]) -> None:
            (err,) = cu.cuLaunchKernel(fn, *lc.grid, *lc.block, lc.smem, hstream, self.args(inputs), 0)
            check(err, "cuLaunchKernel")

        return go

    def unload(self) -> None:
        try:
            driver().cuModuleUnload(self.module)
        except Exception:  # noqa: BLE001 - best effort during teardown
            pass


def synchronize() -> None:
    cu = driver()
    check(cu.cuCtxSynchronize()[0], "kernel execution")
