"""llama.cpp for the local model: build `llama-cpp-python[server]` for this CPU and check that it runs.

The binding is always compiled from source with this machine's CMake flags (never a cached or prebuilt
wheel), and a self-check loads the model in a child process and generates a few tokens, so a build that
crashes on this CPU is found, and rebuilt once, before a run finds out.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from triforge.local.install import LocalModelError, Progress
from triforge.local.paths import local_dir, read_json, write_json


def server_env() -> dict[str, str]:
    """The server's environment: OpenMP threads sleep instead of spinning while they wait.

    llama.cpp's OpenMP workers spin by default; on shared, oversubscribed cores that made generation 7x
    slower (0.5 vs 3.4 tokens/s with 2 threads at load 9 on 2 cores). Set OMP_WAIT_POLICY to override.
    """
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def _quiet(what: str, done: float, total: float) -> None:
    pass


LLAMA_REQUIREMENT = "llama-cpp-python[server]>=0.3.36"
# Modules the llama.cpp server needs: the binding and its `[server]` extra.
LLAMA_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


class LlamaCrashed(LocalModelError):
    """llama.cpp died of a signal in the self-check: a build using CPU instructions this machine lacks."""

    def __init__(self, signum: int, model_name: str) -> None:
        super().__init__(f"llama.cpp crashed (signal {signum}) running {model_name}: its build uses CPU instructions "
                         f"this machine cannot run; rebuild it with `triforge local install --rebuild-server`")
        self.signum = signum


def missing_llama_modules() -> list[str]:
    return [m for m in LLAMA_MODULES if importlib.util.find_spec(m) is None]


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# (cpuinfo flags that must all be present, ggml CMake option)
_X86_OPTIONS = [
    ({"sse4_2"}, "GGML_SSE42"), ({"avx"}, "GGML_AVX"), ({"avx2"}, "GGML_AVX2"), ({"fma"}, "GGML_FMA"),
    ({"f16c"}, "GGML_F16C"), ({"bmi2"}, "GGML_BMI2"), ({"avx_vnni"}, "GGML_AVX_VNNI"),
    ({"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}, "GGML_AVX512"),
    ({"avx512vbmi"}, "GGML_AVX512_VBMI"), ({"avx512_vnni"}, "GGML_AVX512_VNNI"), ({"avx512_bf16"}, "GGML_AVX512_BF16"),
]


def llama_cmake_args(flags: set[str]) -> str | None:
    """CMAKE_ARGS for building llama.cpp on this CPU, or None to keep the default (`-march=native`).

    On CPUs that report AMX, `-march=native` compiles ggml's AMX kernels, and in VMs that advertise AMX
    without supporting its tile state the first matrix multiply dies with SIGSEGV (`ldtilecfg`, found on
    the triforge build machines). There the build names the CPU's other features explicitly, without AMX.
    """
    if not {"amx_tile", "amx_int8", "amx_bf16"} & flags:
        return None
    opts = ["-DGGML_NATIVE=OFF"] + [f"-D{opt}={'ON' if need <= flags else 'OFF'}" for need, opt in _X86_OPTIONS]
    return " ".join(opts + ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"])


def pip_install_command(requirement: str = LLAMA_REQUIREMENT, *, force: bool = False) -> list[str]:
    """The pip command that builds llama-cpp-python from source with this machine's flags.

    pip (23.1+) reuses a wheel it built earlier from the same sdist even with `--no-binary`; such a
    wheel may have been built elsewhere with other CMake flags (AMX: SIGSEGV here). `--no-cache-dir`
    skips that wheel cache, `--no-binary` skips prebuilt wheels of any index, so CMAKE_ARGS always
    applies. `force` reinstalls the binding over a present (crashing) build, leaving its dependencies.
    """
    name = requirement.split("[")[0].split(">")[0].split("=")[0].strip()
    cmd = [sys.executable, "-m", "pip", "install", "-v", "--disable-pip-version-check", "--no-cache-dir",
           f"--no-binary={name}"]  # -v: the build's own output reaches the log (its progress, its errors)
    if force:
        cmd += ["--force-reinstall", "--no-deps"]
    return [*cmd, requirement]


def install_llama_cpp(progress: Progress = _quiet, *, runner: Callable[[list[str], Path], int] | None = None,
                      log: Path | None = None, force: bool = False) -> bool:
    """pip-install `llama-cpp-python[server]` into this environment when missing; returns True if it ran.

    The build compiles llama.cpp from source (minutes) with the CMake flags for this CPU
    (`llama_cmake_args`, unless CMAKE_ARGS is set), never from a cached or prebuilt wheel; its output
    goes to a log file. `force` rebuilds a present installation.
    """
    if not force and not missing_llama_modules():
        return False
    log = log or local_dir() / "llama-cpp-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = pip_install_command(force=force)
    progress("llama-cpp-python", 0, 0)
    rc = (runner or (lambda c, lg: _run_logged(c, lg, progress)))(cmd, log)
    if rc != 0 or missing_llama_modules():
        tail = _last_error_line(log)
        no_compiler = shutil.which("cc") is None or "cmake" in tail.lower() or "compiler" in tail.lower()
        hint = ("install a C/C++ compiler and cmake (e.g. `apt-get install build-essential cmake`)"
                if no_compiler else "read the log and fix the cause")
        raise LocalModelError(
            f"llama-cpp-python did not install ({tail[:160] or f'pip exit {rc}'}); {hint}, then run "
            f"`triforge local install` again (full log: {log})"
        )
    progress("llama-cpp-python", 1, 1)
    return True


def _run_logged(cmd: list[str], log: Path, progress: Progress = _quiet) -> int:
    env = {**os.environ}
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(min(os.cpu_count() or 1, 4)))
    cmake = llama_cmake_args(cpu_flags())
    if cmake and "CMAKE_ARGS" not in env:
        env["CMAKE_ARGS"] = cmake
    with log.open("w") as f:
        f.write(f"triforge: {' '.join(cmd)}\ntriforge: CMAKE_ARGS={env.get('CMAKE_ARGS', '')}\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        while proc.poll() is None:  # the build takes minutes: report how far the compiler got
            time.sleep(1.0)
            done, total = build_step(log)
            progress("llama-cpp-python", done, total)
        return proc.returncode


def build_step(log: Path) -> tuple[int, int]:
    """The last step the build system wrote to the log: ninja's `[n/N]`, or make's `[ p%]` as (p, 100);
    (0, 0) before the first."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, 2) - 8192))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return 0, 0
    steps = re.findall(r"\[\s*(\d+)(?:/(\d+)|%)\]", tail)
    return (int(steps[-1][0]), int(steps[-1][1] or 100)) if steps else (0, 0)


def _last_error_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for ln in reversed(lines):
        if "error" in ln.lower():
            return ln
    return lines[-1] if lines else ""


_SELF_CHECK = (
    "import sys\n"
    "from llama_cpp import Llama\n"
    "m = Llama(sys.argv[1], n_threads=1, n_ctx=256, verbose=False)\n"
    "out = m.create_completion('def add(a, b):', max_tokens=4, temperature=0)\n"
    "print('SELF-CHECK-OK', repr(out['choices'][0]['text']))\n"
)


def self_check(model: Path, *, timeout_s: float = 180.0, python: str = sys.executable) -> float:
    """Load the model and generate a few tokens in a child process; returns seconds, raises with the fix.

    Catches a llama.cpp build that crashes on this CPU before a run finds out. A success is remembered
    (per model file and llama.cpp library), so a second `triforge local install` returns at once.
    """
    from triforge.confine.proc import run

    stamp_file = local_dir() / "self-check.json"
    key = {"model": str(model), "model_mtime_ns": model.stat().st_mtime_ns, "library": _llama_library_id(python)}
    stamp = read_json(stamp_file)
    if stamp is not None and stamp.get("key") == key:
        return 0.0
    res = run([python, "-c", _SELF_CHECK, str(model)], timeout=timeout_s, env=server_env())
    if res.timed_out:
        raise LocalModelError(f"llama.cpp took over {timeout_s:g} s to load {model.name} and write 4 tokens; "
                              f"the machine is overloaded or the build is too slow; try again later")
    if not res.ok or "SELF-CHECK-OK" not in res.stdout:
        rc = res.returncode or 0
        if rc < 0 and -rc in (11, 4, 7):  # SIGSEGV, SIGILL, SIGBUS
            raise LlamaCrashed(-rc, model.name)
        last = (res.stderr.strip().splitlines() or [f"exit status {rc}"])[-1]
        raise LocalModelError(f"llama.cpp could not run {model.name} ({last[:200]}); run "
                              f"`triforge local install --verify`, or pass a valid GGUF with --model-path")
    write_json(stamp_file, {"key": key, "seconds": res.duration_s, "time": time.time()})
    return res.duration_s


def _llama_library_id(python: str) -> str:
    """Identifies the installed llama.cpp build (path and mtime of the binding's package)."""
    spec = importlib.util.find_spec("llama_cpp") if python == sys.executable else None
    if spec is None or not spec.origin:
        return ""
    lib = Path(spec.origin).parent / "lib"
    mtimes = [p.stat().st_mtime_ns for p in lib.glob("*.so*")] if lib.is_dir() else []
    return f"{spec.origin}:{max(mtimes, default=0)}"


@dataclass
class ServerCheck:
    """What `prepare_server` did: built llama-cpp-python, rebuilt it after a crash, and the self-check's seconds."""

    built: bool
    healed_after_signal: int | None
    check_s: float


def prepare_server(model: Path, progress: Progress = _quiet, *, rebuild: bool = False,
                   say: Callable[[str], None] = lambda text: None,
                   runner: Callable[[list[str], Path], int] | None = None, log: Path | None = None,
                   python: str = sys.executable) -> ServerCheck:
    """Install llama-cpp-python when missing (or `rebuild` it), then self-check it on `model`.

    A build that crashes on this CPU (a wheel built elsewhere, or one pip reused from its cache) is
    rebuilt once from source with this machine's flags, saying so through `say`, and checked again; a
    second crash is reported with its cause.
    """
    built = install_llama_cpp(progress, runner=runner, log=log, force=rebuild)
    progress("self-check", 0, 0)
    try:
        check_s = self_check(model, python=python)
        healed = None
    except LlamaCrashed as e:
        if rebuild:
            raise
        say(f"llama.cpp crashed (signal {e.signum}) in the self-check: its build does not run on this CPU; "
            f"rebuilding llama-cpp-python once from source with this machine's flags (minutes)")
        install_llama_cpp(progress, runner=runner, log=log, force=True)
        progress("self-check", 0, 0)
        check_s, healed, built = self_check(model, python=python), e.signum, True
        say("the rebuilt llama.cpp passes the self-check")
    progress("self-check", 1, 1)
    return ServerCheck(built=built, healed_after_signal=healed, check_s=check_s)
