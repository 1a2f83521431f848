"""Running a submitted program with limits: rlimits, a fresh temp cwd, a scrubbed env, no network when possible."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from triforge.core import proc

MEMORY_LIMIT_BYTES = 8 << 30
FILE_SIZE_LIMIT_BYTES = 64 << 20
OPEN_FILES_LIMIT = 1024


@dataclass(frozen=True)
class Limits:
    wall_s: float
    memory_bytes: int = MEMORY_LIMIT_BYTES
    file_bytes: int = FILE_SIZE_LIMIT_BYTES

    def cpu_s(self) -> int:
        # CPU time adds up over threads: allow every core for the whole wall budget, plus start-up.
        return int(self.wall_s * (os.cpu_count() or 1)) + 10


def _preexec(limits: Limits) -> Callable[[], None]:
    def apply() -> None:
        cpu = limits.cpu_s()
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES_LIMIT, OPEN_FILES_LIMIT))

    return apply


@cache
def net_isolation_prefix() -> tuple[str, ...]:
    """`unshare --net --` when this process may create a network namespace (root), else nothing."""
    exe = shutil.which("unshare")
    if exe is None or os.geteuid() != 0:
        return ()
    try:
        ok = subprocess.run([exe, "--net", "--", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return (exe, "--net", "--") if ok else ()


def isolation_summary(limits: Limits) -> str:
    net = "no network (own net namespace)" if net_isolation_prefix() else "network NOT isolated (needs root)"
    return (f"rlimits: address space {limits.memory_bytes >> 30} GiB, cpu {limits.cpu_s()} s, "
            f"file size {limits.file_bytes >> 20} MiB, no core dumps; wall {limits.wall_s:g} s; "
            f"fresh temp cwd; scrubbed env; {net}")


def _env(home: str) -> dict[str, str]:
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ") if k in os.environ}
    return keep | {"HOME": home, "TMPDIR": home, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}


def run_python(source: str, limits: Limits, *, python: str = sys.executable,
               stdin: str | None = None) -> tuple[proc.ProcResult, str]:
    """Run `source` as a Python program under `limits`; returns the result and a summary of the isolation."""
    with tempfile.TemporaryDirectory(prefix="cpbench-sub-") as tmp:
        prog = Path(tmp, "submission.py")
        prog.write_text(source, encoding="utf-8")
        cmd = [*net_isolation_prefix(), python, "-I", str(prog)]
        res = proc.run(cmd, timeout=limits.wall_s, cwd=tmp, env=_env(tmp), input=stdin,
                       preexec_fn=_preexec(limits))
    return res, isolation_summary(limits)
