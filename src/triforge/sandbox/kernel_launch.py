"""Starting one sandboxed kernel: the launcher's spec, the process, finding the kernel, checking its isolation.

`KernelProcess` (kernel_process.py) owns what is started here and talks to it; this module only
starts it and reads back what holds.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from triforge.confine.host import CgroupSet, Isolation, verify
from triforge.confine.isolation import Mechanism, plan, refusal
from triforge.confine.limits import SandboxLimits, kernel_env
from triforge.confine.tree import outermost
from triforge.core.errors import TriforgeError

PORTS = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}


class SandboxError(TriforgeError):
    """The sandbox itself failed (a kernel that would not start), not the code it ran."""


@functools.cache
def remove_stale_runtimes() -> None:
    """Once per process: remove runtime directories left by triforge processes that were killed."""
    for path in Path(tempfile.gettempdir()).glob("tfk-*-*"):
        owner = path.name.split("-")[1]
        if owner.isdigit() and not psutil.pid_exists(int(owner)):
            shutil.rmtree(path, ignore_errors=True)


def socket_base(runtime: Path) -> str:
    """The path prefix of the kernel's ZMQ `ipc://` sockets (one per port number in `PORTS`)."""
    return str(runtime / "k")


@dataclass
class Launched:
    """A kernel's launcher, started and not yet answering."""

    popen: subprocess.Popen[bytes]
    mechanism: Mechanism
    writable: list[str] | None  # host paths the kernel writes through to; None: the whole filesystem
    reaper: bool  # the launcher stays as PID 1 of the kernel's namespace
    lifeline: int | None  # write end of the pipe whose closing takes the namespace down
    pidfd: int | None  # readable once the launcher is gone (None on old kernels)


def launch(limits: SandboxLimits, cwd: Path, runtime: Path, cgroups: CgroupSet, key: str) -> Launched:
    """Write the connection file and the launcher's spec into `runtime`, then start the launcher."""
    base = socket_base(runtime)
    conn = {"transport": "ipc", "ip": base, "key": key, "signature_scheme": "hmac-sha256", **PORTS}
    (runtime / "kernel.json").write_text(json.dumps(conn))
    launch_plan = plan(limits.policy(), runtime / "spec.json", writable=[str(cwd), str(runtime)])
    lifeline_r, lifeline_w = os.pipe()  # the kernel's namespace dies when this process does
    reaper = bool(launch_plan.spec["reaper"])
    spec = {
        **launch_plan.spec,
        "cgroups": [str(p) for p in cgroups.dirs.values()],
        "rlimits": limits.rlimits(),
        "lifeline": lifeline_r if reaper else None,
        "cwd": str(cwd),
        "kernel_argv": ["-f", str(runtime / "kernel.json"), "--HistoryManager.enabled=False",
                        "--IPythonKernel._execute_sleep=0"],
    }
    fs = spec["filesystem"]
    # host paths the kernel writes through to (the private /tmp is not the host's)
    writable = outermost(fs["keep_rw"]) if fs else None
    (runtime / "spec.json").write_text(json.dumps(spec))
    for sub in ("home", "ipython", "mpl"):
        (runtime / sub).mkdir()
    env = kernel_env(limits, runtime)
    if not reaper:  # ipykernel then watches its parent itself
        env["JPY_PARENT_PID"] = str(os.getpid())
    try:
        with open(runtime / "kernel.log", "wb") as log:
            popen = subprocess.Popen(
                launch_plan.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
                pass_fds=(lifeline_r,),
            )
    except BaseException:
        os.close(lifeline_w)
        raise
    finally:
        os.close(lifeline_r)
    return Launched(popen, launch_plan.mechanism, writable, reaper, lifeline_w, pidfd(popen.pid))


def pidfd(pid: int) -> int | None:
    """A pidfd for `pid`: readable once it has ended and been reaped. None on old kernels: poll instead."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def find_kernel_pid(popen: subprocess.Popen[bytes], timeout: float = 5.0) -> int:
    """Host PID of the process running ipykernel: the deepest launcher process of the chain."""
    top = psutil.Process(popen.pid)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        tree = [top, *top.children(recursive=True)]
        for p in tree:
            if not p.children() and "triforge/confine/launcher" in " ".join(p.cmdline()):
                return p.pid
        time.sleep(0.01)
    raise SandboxError("could not find the kernel process")


def checked_isolation(kernel_pid: int, cgroups: CgroupSet, limits: SandboxLimits, mechanism: Mechanism) -> Isolation:
    """What holds for the kernel, read back from /proc; refuses (`IsolationUnavailable`) when the
    policy asks for more: model-written code never runs believing it is confined when it is not."""
    isolation = verify(kernel_pid, cgroups, limits.cpu_seconds, mechanism.name)
    policy = limits.policy()
    gaps = isolation.gaps(policy.network, not policy.hide_home) if policy.enabled else []
    if gaps:
        raise refusal(f"{mechanism.name} started, but {', '.join(gaps)}")
    if limits.memory_mb and "memory cgroup" not in isolation.memory_limit:  # KernelSandbox measures the tree
        isolation = dataclasses.replace(isolation, memory_limit=(
            f"{isolation.memory_limit} per process + {limits.memory_mb} MiB for the kernel and its children "
            "together (measured every 0.1 s)"))
    return isolation
