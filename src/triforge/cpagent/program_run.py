"""Running a submitted program for grading: the isolation runner (`confine.run`) with CP-Bench's limits."""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from triforge.confine import proc
from triforge.confine.forkserver import run_confined
from triforge.confine.isolation import IsolationPolicy
from triforge.confine.run import run_isolated

MEMORY_LIMIT_BYTES = 8 << 30
FILE_SIZE_LIMIT_BYTES = 64 << 20
OPEN_FILES_LIMIT = 1024
# What a fork server imports before forking a program or a harness job (confine.forkserver).
PRELOAD = ("cpmpy", "numpy", "ortools.sat.python.cp_model")


@dataclass(frozen=True)
class Limits:
    wall_s: float
    memory_bytes: int = MEMORY_LIMIT_BYTES
    file_bytes: int = FILE_SIZE_LIMIT_BYTES

    def cpu_s(self) -> int:
        # CPU time adds up over threads: allow every core for the whole wall budget, plus start-up.
        return int(self.wall_s * (os.cpu_count() or 1)) + 10

    def proc_limits(self) -> proc.ProcLimits:
        return proc.ProcLimits(memory_mb=self.memory_bytes >> 20, cpu_seconds=self.cpu_s(),
                               max_file_mb=self.file_bytes >> 20, max_processes=512, open_files=OPEN_FILES_LIMIT)


def _summary(limits: Limits, isolation: str) -> str:
    return (f"rlimits: address space {limits.memory_bytes >> 30} GiB, cpu {limits.cpu_s()} s, "
            f"file size {limits.file_bytes >> 20} MiB, no core dumps; wall {limits.wall_s:g} s; "
            f"fresh temp cwd; scrubbed env; {isolation}")


def policy_for(python: str, policy: IsolationPolicy | None = None) -> IsolationPolicy:
    policy = policy or IsolationPolicy.from_env()
    if python != sys.executable:  # another interpreter and its packages must stay readable
        policy = policy.widened(read_only=(os.path.dirname(os.path.dirname(os.path.realpath(python))),))
    return policy


def run_harness(python: str, harness: Path, mode: str, job: Path, result: Path, *, timeout: float,
                workdir: str | Path) -> proc.ProcResult:
    """One cold run of the grading harness (no warm server: `TRIFORGE_CPBENCH_WARM=0`, or another
    interpreter) under the same isolation policy as every other untrusted run: reference models come
    from data users download. `job` and `result` must lie in `workdir`, the one writable place."""
    return run_isolated([python, str(harness), mode, str(job), str(result)], workdir=workdir, timeout=timeout,
                        policy=policy_for(python)).result


def run_python(source: str, limits: Limits, *, python: str = sys.executable, stdin: str | None = None,
               policy: IsolationPolicy | None = None) -> tuple[proc.ProcResult, str]:
    """Run `source` as a Python program under `limits`; returns the result and a summary of the isolation.

    Raises `IsolationUnavailable` (a `UserError`) when the isolation cannot be held here and was not
    turned off (`--isolation none`).
    """
    with tempfile.TemporaryDirectory(prefix="cpbench-sub-") as tmp:
        prog = Path(tmp, "submission.py")
        prog.write_text(source, encoding="utf-8")
        policy = policy_for(python, policy)
        run = run_confined([python, "-I", str(prog)], workdir=tmp, timeout=limits.wall_s, policy=policy,
                           limits=limits.proc_limits(), input=stdin, preload=PRELOAD)
    net = "no network (own net namespace)" if run.policy.enabled and not run.policy.network else "network NOT isolated"
    return run.result, _summary(limits, f"{net}; {run.isolation}")
