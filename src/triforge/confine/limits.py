"""What a sandboxed kernel may do: its limits, its environment, where it may write."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from triforge.confine.isolation import IsolationPolicy

_PASS_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "PYTHONHASHSEED")

@dataclass(frozen=True)
class SandboxLimits:
    """What a kernel is allowed; fixed when it starts, so pooled kernels share one `SandboxLimits`."""

    memory_mb: int | None = 4096
    cpu_seconds: int | None = 600  # per cell: CPU time of the kernel and its children (one core-second each)
    max_processes: int | None = 256  # tasks (threads count) in the kernel's pids cgroup
    max_file_mb: int | None = 1024
    network: bool = False  # shorthand for the policy's `network`
    env: tuple[tuple[str, str], ...] = field(default=())
    isolation: IsolationPolicy = field(default_factory=IsolationPolicy.from_env)
    folder_mb: int | None = 2048  # what the writable folders may grow by from the first cell (measured every 0.1 s)

    def policy(self) -> IsolationPolicy:
        return self.isolation.widened(network=self.network)

    def rlimits(self) -> dict[str, list[int]]:
        rl: dict[str, list[int]] = {"RLIMIT_CORE": [0, 0]}
        if self.memory_mb:
            rl["RLIMIT_AS"] = [self.memory_mb << 20] * 2
        if self.max_file_mb:
            rl["RLIMIT_FSIZE"] = [self.max_file_mb << 20] * 2
        if self.max_processes and os.getuid() != 0:
            rl["RLIMIT_NPROC"] = [self.max_processes, self.max_processes]
        return rl  # CPU time is metered per cell from outside (KernelProcess.cpu_seconds)


def kernel_env(limits: SandboxLimits, runtime: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _PASS_ENV or k.startswith("LC_")}
    env.update(
        HOME=str(runtime / "home"),
        IPYTHONDIR=str(runtime / "ipython"),
        MPLCONFIGDIR=str(runtime / "mpl"),
        MPLBACKEND="Agg",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(dict(limits.env))
    return env
