"""Fast compile: NVRTC through cuda-python's bindings, cached on source and options; nvcc checks for CI.

A candidate is compiled only in a confined process: inside the lab's worker, or (for the harness's
PTX audit before the GPU) in a one-shot `compile_job` under the isolation policy with a memory bound."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from triforge.astra.preprocess import ALLOWED_INCLUDES, check_directives
from triforge.confine import proc
from triforge.confine.isolation import IsolationPolicy
from triforge.confine.proc import ProcLimits
from triforge.confine.run import run_isolated, scrubbed_env

CONFINED_ENV = "TRIFORGE_ASTRA_WORKER"  # set in the worker's and the compile job's environment: already confined
COMPILE_TIMEOUT = 300.0  # seconds for one compile outside the worker
COMPILE_MEMORY_MB = 4096  # an honest candidate compiles in a few hundred MiB
MAX_RESULT_BYTES = 64 << 20
COMPILE_CPU_S = 30  # CPU seconds for one compile in a confined process; the lab's kernels take 1 to 3
MAX_CUBIN_BYTES = 16 << 20  # an honest kernel's cubin is tens of KiB; an initializer bomb's is GiBs
# what CUDA, torch and Triton read from the environment; nothing else of the host's passes
_PASS_PREFIXES = ("CUDA_", "NVIDIA_", "NCCL_", "NVSHMEM_", "TORCH_", "PYTORCH_", "TRITON_", "TORCHINDUCTOR_")
_PASS = ("LD_LIBRARY_PATH", "TRIFORGE_DEBUG")


@dataclass
class CompileResult:
    ok: bool
    cubin: bytes = b""
    lowered: dict[str, str] = field(default_factory=dict)  # name expression -> mangled name
    log: str = ""
    options: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    ptx: str = ""

    def resources(self) -> dict[str, dict[str, int]]:
        return parse_ptxas(self.log)


def cuda_include_dir() -> str | None:
    """A directory holding cuda_bf16.h, cuda_fp16.h and cuda_fp8.h."""
    cands = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(nvcc).resolve().parent.parent))
    cands += ["/usr/local/cuda"]
    for base in cands:
        if base and (Path(base) / "include" / "cuda_fp8.h").is_file():
            return str(Path(base) / "include")
    for p in sys.path:
        for sub in ("nvidia/cu13/include", "nvidia/cuda_runtime/include"):
            if (Path(p) / sub / "cuda_fp8.h").is_file():
                return str(Path(p) / sub)
    return None


def options_for(arch: str, fast_math: bool, extra: list[str] | None = None) -> list[str]:
    opts = [f"-arch={arch}", "-std=c++17", "--ptxas-options=-v", "-default-device", "-lineinfo"]
    if fast_math:
        opts.append("--use_fast_math")
    inc = cuda_include_dir()
    if inc:
        opts.append(f"-I{inc}")
    return opts + list(extra or [])


def cache_dir() -> Path:
    base = os.environ.get("TRIFORGE_ASTRA_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "triforge", "astra-nvrtc")
    p = Path(base)
    p.mkdir(parents=True, exist_ok=True)
    return p


def confined_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The scrubbed environment plus what CUDA needs, the import path, and the mark of a confined process
    (for the one-shot compile job and the lab's worker)."""
    passed = {k: v for k, v in os.environ.items() if k in _PASS or k.startswith(_PASS_PREFIXES)}
    passed.update(PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)), **{CONFINED_ENV: "1"})
    passed.update(extra or {})
    return scrubbed_env(home, passed)


def cuda_reads() -> tuple[str, ...]:
    """The host folders a confined CUDA process must read besides the interpreter's: the CUDA headers, and
    the driver's own places under /run, which the sandbox covers (a containerised driver's root, the
    persistence daemon's socket)."""
    inc = cuda_include_dir()
    return tuple(p for p in (inc, "/run/nvidia", "/run/nvidia-persistenced") if p and os.path.isdir(p))


def cache_key(source: str, options: list[str], names: list[str], nvrtc_version: str) -> str:
    blob = json.dumps([source, options, sorted(names), nvrtc_version]).encode()
    return hashlib.sha256(blob).hexdigest()


_MEM: dict[str, CompileResult] = {}


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError:  # cuda-python < 12.6 layout
        from cuda import nvrtc  # type: ignore[no-redef]
    return nvrtc


def _check(err, what: str) -> None:
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err}")


def nvrtc_compile(source: str, names: list[str], arch: str = "sm_90", fast_math: bool = False,
                  use_cache: bool = True, extra: list[str] | None = None) -> CompileResult:
    """Compile `source` to a cubin for `arch`, keeping the mangled names of `names` (template instances)."""
    refused = check_directives(source)
    if refused:
        # the compiler never sees a source that names another file: nothing outside the allow list is read
        return CompileResult(False, log="\n".join(f"candidate.cu({e.line}): refused: {e.detail}" for e in refused))
    nvrtc = _nvrtc()
    opts = options_for(arch, fast_math, extra)
    err, major, minor = nvrtc.nvrtcVersion()
    key = cache_key(source, opts, names, f"{major}.{minor}")
    if use_cache and key in _MEM:
        hit = _MEM[key]
        return CompileResult(True, hit.cubin, hit.lowered, hit.log, opts, 0.0, True, hit.ptx)
    disk = cache_dir() / f"{key}.json"
    meta: dict = {}
    if use_cache and disk.is_file() and (cache_dir() / f"{key}.cubin").is_file():
        try:
            meta = json.loads(disk.read_text())
        except (OSError, ValueError):  # a cache file damaged outside triforge: compile again
            meta = {}
    if use_cache and meta.get("lowered") is not None:
        cubin = (cache_dir() / f"{key}.cubin").read_bytes()
        res = CompileResult(True, cubin, meta["lowered"], meta["log"], opts, 0.0, True, meta.get("ptx", ""))
        if res.ptx:
            _MEM[key] = res
            return res
    # model-written source is compiled only where it is confined: here inside the lab's worker, else
    # in a one-shot confined process (a template or initializer bomb ends that process, not the harness)
    res = compile_here(source, names, opts) if os.environ.get(CONFINED_ENV) else compile_confined(source, names, opts)
    if res.ok and use_cache:
        _MEM[key] = res
        # cubin first, each through a temporary name: a worker on another GPU sharing this cache never
        # reads a half-written file, and sees the json (its "cached" signal) only once the cubin is whole
        _write_atomic(cache_dir() / f"{key}.cubin", res.cubin)
        _write_atomic(disk, json.dumps({"lowered": res.lowered, "log": res.log, "options": opts,
                                        "ptx": res.ptx}).encode())
    return res


CPU_BOUND_REASON = (f"the compile used more than its {COMPILE_CPU_S} s of CPU time and was stopped "
                    "(a compile bomb: huge static data, runaway templates or unrolling)")


def stopped_at_cpu_bound(returncode: int | None) -> bool:
    """A process ended by SIGXCPU, seen directly (-24) or through a launcher or shell (128 + 24)."""
    return returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU)


@contextlib.contextmanager
def cpu_bound(seconds: int) -> Iterator[None]:
    """The process's CPU-time soft limit at `seconds` from now, for the span of one compile: past it the
    kernel ends the process with SIGXCPU (NVRTC holds the thread, so no Python timer could stop it)."""
    saved = resource.getrlimit(resource.RLIMIT_CPU)
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime) + 1 + seconds
    hard = saved[1]
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, saved)


def compile_here(source: str, names: list[str], opts: list[str]) -> CompileResult:
    """NVRTC in this process: only ever called in a confined one (the worker, `compile_job`), which a
    compile past `COMPILE_CPU_S` ends (SIGXCPU); an output past `MAX_CUBIN_BYTES` is a compile error."""
    nvrtc = _nvrtc()
    t0 = time.perf_counter()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"candidate.cu", 0, [], [])
    _check(err, "nvrtcCreateProgram")
    try:
        for n in names:
            _check(nvrtc.nvrtcAddNameExpression(prog, n.encode())[0], "nvrtcAddNameExpression")
        bopts = [o.encode() for o in opts]
        with cpu_bound(COMPILE_CPU_S):
            (cerr,) = nvrtc.nvrtcCompileProgram(prog, len(bopts), bopts)
        err, size = nvrtc.nvrtcGetProgramLogSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = sanitize_log(buf.decode(errors="replace").rstrip("\x00").strip())
        if int(cerr) != 0:
            return CompileResult(False, log=log, options=opts, seconds=time.perf_counter() - t0)
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(err, "nvrtcGetCUBINSize")
        err, ptx_size = nvrtc.nvrtcGetPTXSize(prog)
        _check(err, "nvrtcGetPTXSize")
        if max(size, ptx_size) > MAX_CUBIN_BYTES:
            why = (f"candidate.cu: error: the compiled kernel is {max(size, ptx_size) / 2**20:.1f} MiB, over the "
                   f"lab's {MAX_CUBIN_BYTES >> 20} MiB bound (a kernel needs kilobytes: no large static data)")
            return CompileResult(False, log=why, options=opts, seconds=time.perf_counter() - t0)
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin)[0], "nvrtcGetCUBIN")
        pbuf = b" " * ptx_size
        _check(nvrtc.nvrtcGetPTX(prog, pbuf)[0], "nvrtcGetPTX")
        ptx = pbuf.decode(errors="replace").rstrip("\x00")
        lowered = {}
        for n in names:
            err, low = nvrtc.nvrtcGetLoweredName(prog, n.encode())
            _check(err, "nvrtcGetLoweredName")
            lowered[n] = low.decode() if isinstance(low, bytes) else str(low)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return CompileResult(True, cubin, lowered, log, opts, time.perf_counter() - t0, False, ptx)


def compile_confined(source: str, names: list[str], opts: list[str], timeout: float | None = None,
                     memory_mb: int | None = None) -> CompileResult:
    """`compile_here` in a one-shot process under the isolation policy, with a deadline and a memory bound.

    Raises `IsolationUnavailable` where isolation cannot be held and was not turned off."""
    timeout, memory_mb = timeout or COMPILE_TIMEOUT, memory_mb or COMPILE_MEMORY_MB
    with tempfile.TemporaryDirectory(prefix="triforge-nvrtc-") as d:
        work = Path(d)
        (work / "job.json").write_text(json.dumps({"source": source, "names": names, "options": opts}))
        policy = IsolationPolicy.from_env().widened(read_only=cuda_reads())
        run = run_isolated([sys.executable, "-m", "triforge.astra.compile_job"], workdir=work, timeout=timeout,
                           policy=policy, limits=ProcLimits(memory_mb=memory_mb), env=confined_env(work),
                           output_limit=20_000).result
        out = work / "result.json"
        if run.returncode == 0 and out.is_file() and out.stat().st_size <= MAX_RESULT_BYTES:
            d_ = json.loads(out.read_text())
            return CompileResult(d_["ok"], base64.b64decode(d_["cubin"]), d_["lowered"], d_["log"], opts,
                                 d_["seconds"], False, d_["ptx"])
    if run.timed_out:
        why = f"the compile took longer than {timeout:.0f} s and was stopped"
    elif stopped_at_cpu_bound(run.returncode):
        why = CPU_BOUND_REASON
    elif "out of memory" in run.stderr or "MemoryError" in run.stderr or "bad_alloc" in run.stderr:
        why = f"the compiler ran out of its {memory_mb} MiB memory bound"
    else:
        why = f"the compiler process failed (exit code {run.returncode})"
    return CompileResult(False, log=f"candidate.cu: error: {why}", options=opts, seconds=run.duration_s)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


_DIAG = re.compile(r"^(.*?)\((\d+)\): (error|warning|remark|catastrophic error|note)")


def sanitize_log(log: str) -> str:
    """Keep what the compiler said about the candidate's own lines and ptxas's numbers; a diagnostic
    located in any other file is reduced to one line without its text (a log quotes only the candidate)."""
    out: list[str] = []
    quoting = True
    for line in log.splitlines():
        m = _DIAG.match(line)
        if m:
            quoting = m.group(1) == "candidate.cu"
            if not quoting:
                name = Path(m.group(1)).name
                shown = name if name in ALLOWED_INCLUDES or name.endswith((".h", ".hpp")) and "cuda" in name else "another file"
                out.append(f"{m.group(3)} in {shown} (its text is not shown)")
                continue
        elif line.startswith(("ptxas", "nvlink")) or re.match(r"^\d+ (errors?|catastrophic) ", line) \
                or line.startswith("Compilation terminated"):
            quoting = True
        if quoting:
            out.append(line)
    return "\n".join(out)


_PTXAS_FN = re.compile(r"Compiling entry function '([^']+)'|Function properties for (\S+)")
_REGS = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_STACK = re.compile(r"(\d+) bytes stack frame")


def parse_ptxas(log: str) -> dict[str, dict[str, int]]:
    """Per mangled function: registers, static smem, stack frame and spill bytes from a `-v` ptxas log."""
    out: dict[str, dict[str, int]] = {}
    cur = None
    for line in log.splitlines():
        m = _PTXAS_FN.search(line)
        if m:
            cur = m.group(1) or m.group(2)
            out.setdefault(cur, {"registers": 0, "smem": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0})
            continue
        if cur is None:
            continue
        if (m := _REGS.search(line)):
            out[cur]["registers"] = int(m.group(1))
            if (s := _SMEM.search(line)):
                out[cur]["smem"] = int(s.group(1))
        if (m := _SPILL.search(line)):
            out[cur]["spill_stores"], out[cur]["spill_loads"] = int(m.group(1)), int(m.group(2))
        if (m := _STACK.search(line)):
            out[cur]["stack"] = int(m.group(1))
    return out


def nvcc_check(source: str, workdir: Path, arch: str = "sm_90", nvcc: str = "nvcc", timeout: float = 120) -> proc.ProcResult:
    """Compile `source` with nvcc to PTX for `arch`, instantiating the entry for every dtype (CI check)."""
    path = workdir / "kernel.cu"
    path.write_text(source)
    return proc.run([nvcc, f"-arch={arch}", "-std=c++17", "--ptx", "-o", str(workdir / "kernel.ptx"), str(path)],
                    timeout=timeout, cwd=workdir)


def instantiate(source: str, entry: str, ctypes: list[str]) -> str:
    """Append explicit instantiations (what NVRTC's name expressions do) so nvcc emits code for each."""
    inst = "\n".join(f"template __global__ void {entry}<{c}>({_params_decl(source, entry, c)});" for c in ctypes)
    return source + "\n" + inst + "\n"


def _params_decl(source: str, entry: str, ctype: str) -> str:
    m = re.search(r"void\s+" + re.escape(entry) + r"\s*\(", source)
    assert m, entry
    depth, i = 1, m.end()
    while depth:
        depth += {"(": 1, ")": -1}.get(source[i], 0)
        i += 1
    params = re.sub(r"//[^\n]*", "", source[m.end(): i - 1])
    return re.sub(r"\bT\b", ctype, params)
