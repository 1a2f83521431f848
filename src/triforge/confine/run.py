"""One-shot untrusted programs under the isolation policy: the same launcher and policy as the kernels.

`run_isolated` runs one command (a graded program, a reference model, a worker) confined by an
`IsolationPolicy`: own network, PID and mount namespaces, the host read-only except its workdir,
a private /tmp, the home hidden, no capabilities, rlimits, and the pids / memory cgroups where
this process may create them. Output, deadline and killing the whole tree are `proc.run`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from triforge.confine import proc
from triforge.confine.host import CgroupSet, Isolation, verify
from triforge.confine.isolation import CONFINEMENT_FAILED, IsolationPolicy, plan, refusal
from triforge.confine.tree import descendants

_PASS_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


@dataclass
class IsolatedResult:
    result: proc.ProcResult
    isolation: str  # what held, as verified for this policy on this machine (see `verified`)
    policy: IsolationPolicy


def scrubbed_env(home: str | Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Only locale, PATH and TZ from the host; HOME and TMPDIR point into the workdir; no keys, no tokens."""
    env = {k: v for k, v in os.environ.items() if k in _PASS_ENV or k.startswith("LC_")}
    env.update(HOME=str(home), TMPDIR=str(home), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    env.update(extra or {})
    return env


def rlimits_spec(limits: proc.ProcLimits, memory_rlimit: str = "RLIMIT_AS") -> dict[str, list[int]]:
    rl: dict[str, list[int]] = {} if limits.core_dumps else {"RLIMIT_CORE": [0, 0]}
    if limits.memory_mb:
        rl[memory_rlimit] = [limits.memory_mb << 20] * 2
    if limits.cpu_seconds:
        rl["RLIMIT_CPU"] = [limits.cpu_seconds, limits.cpu_seconds + 5]
    if limits.max_file_mb:
        rl["RLIMIT_FSIZE"] = [limits.max_file_mb << 20] * 2
    if limits.max_processes and os.getuid() != 0:  # root: the pids cgroup instead
        rl["RLIMIT_NPROC"] = [limits.max_processes] * 2
    if limits.open_files:
        rl["RLIMIT_NOFILE"] = [limits.open_files] * 2
    return rl


def run_isolated(
    argv: Sequence[str],
    *,
    workdir: str | Path,
    timeout: float | None,
    policy: IsolationPolicy | None = None,
    limits: proc.ProcLimits | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    output_limit: int = proc.DEFAULT_OUTPUT_LIMIT,
) -> IsolatedResult:
    """Run `argv` in `workdir` (the one writable place) under `policy` (default: `IsolationPolicy.from_env()`).

    Raises `IsolationUnavailable` when the policy cannot be held here and was not turned off; never
    raises for what the program does. `env` defaults to `scrubbed_env(workdir)`.
    """
    policy = policy or IsolationPolicy.from_env()
    limits = limits or proc.ProcLimits()
    workdir = Path(workdir).resolve()
    runtime = Path(tempfile.mkdtemp(prefix=f"tfk-{os.getpid()}-run-"))
    cgroups = CgroupSet(limits.max_processes, limits.memory_mb) if policy.enabled else None
    try:
        launch = plan(policy, runtime / "spec.json", writable=[str(workdir)], one_shot=True)
        spec = {**launch.spec, "cgroups": [str(p) for p in cgroups.dirs.values()] if cgroups else [],
                "rlimits": rlimits_spec(limits), "cwd": str(workdir), "exec_argv": list(argv)}
        (runtime / "spec.json").write_text(json.dumps(spec))
        held = cgroups is not None and "memory" in cgroups.dirs
        res = proc.run(launch.argv, timeout=timeout, cwd=workdir, env=scrubbed_env(workdir) if env is None else env,
                       input=input, output_limit=output_limit, tree_memory_mb=None if held else limits.memory_mb,
                       folder=((workdir, *policy.writable), limits.folder_mb) if limits.folder_mb else None)
        if res.returncode == CONFINEMENT_FAILED and "sandbox launcher:" in res.stderr:
            raise refusal(res.stderr.strip().splitlines()[-1])
        res.cmd = list(argv)
        return IsolatedResult(res, verified(policy).confinement() if policy.enabled else "NOT isolated (turned off)",
                              policy)
    finally:
        if cgroups is not None:
            cgroups.destroy()
        shutil.rmtree(runtime, ignore_errors=True)


class IsolatedProcess:
    """A long-lived process under the policy (a warm server, a worker): `popen` to talk to it, `close` to end it.

    Its one writable host place is `workdir`: hand it files there. Killing its process group (or
    `close`) takes the whole PID namespace with it. `memory_rlimit`: the rlimit that holds
    `limits.memory_mb` per process (RLIMIT_DATA for a CUDA process: the driver reserves far more
    address space than it uses, so RLIMIT_AS would stop it from starting).

    While it runs, a thread measures every 0.1 s (`proc.watches`) the memory of its whole process tree
    where no memory cgroup holds it (the rlimit holds each process alone), and how much `workdir` grew
    (`limits.folder_mb`); past either, the process is killed and `stopped` says why.
    """

    def __init__(self, argv: Sequence[str], *, workdir: str | Path, policy: IsolationPolicy | None = None,
                 limits: proc.ProcLimits | None = None, env: Mapping[str, str] | None = None,
                 memory_rlimit: str = "RLIMIT_AS", **popen_options: object) -> None:
        self.policy = policy or IsolationPolicy.from_env()
        self.workdir = Path(workdir).resolve()
        limits = limits or proc.ProcLimits()
        self._runtime = Path(tempfile.mkdtemp(prefix=f"tfk-{os.getpid()}-srv-"))
        self._cgroups = CgroupSet(limits.max_processes, limits.memory_mb) if self.policy.enabled else None
        try:
            launch = plan(self.policy, self._runtime / "spec.json", writable=[str(self.workdir)], one_shot=True)
            spec = {**launch.spec, "cgroups": [str(p) for p in self._cgroups.dirs.values()] if self._cgroups else [],
                    "rlimits": rlimits_spec(limits, memory_rlimit), "cwd": str(self.workdir), "exec_argv": list(argv)}
            (self._runtime / "spec.json").write_text(json.dumps(spec))
            self.popen = subprocess.Popen(launch.argv, cwd=self.workdir, start_new_session=True,
                                          env=scrubbed_env(self.workdir) if env is None else dict(env),
                                          **popen_options)  # type: ignore[call-overload]
        except BaseException:
            self.close()
            raise
        self.isolation = verified(self.policy).confinement() if self.policy.enabled else "NOT isolated (turned off)"
        self.stopped: str | None = None
        cgroup_memory = self._cgroups is not None and "memory" in self._cgroups.dirs
        watch = proc.watches(lambda: descendants(self.popen.pid) | {self.popen.pid},
                             tree_memory_mb=None if cgroup_memory else limits.memory_mb,
                             folder=((self.workdir, *self.policy.writable), limits.folder_mb)
                             if limits.folder_mb else None)
        self._closing = threading.Event()
        if watch is not None:
            threading.Thread(target=self._watch, args=(watch,), name="isolated-process-watch", daemon=True).start()

    def _watch(self, watch: proc.Watch) -> None:
        while not self._closing.wait(0.1) and self.popen.poll() is None:
            if (reason := watch()) is not None:
                self.stopped = reason
                proc.kill_group(self.popen.pid)
                return

    def close(self) -> None:
        closing = getattr(self, "_closing", None)
        if closing is not None:
            closing.set()
        popen = getattr(self, "popen", None)
        if popen is not None:
            proc.kill_group(popen.pid)
            popen.wait()
        if self._cgroups is not None:
            self._cgroups.destroy()
        shutil.rmtree(self._runtime, ignore_errors=True)


WORKDIR_LABEL = "its own working folder"


@functools.cache
def verified(policy: IsolationPolicy) -> Isolation:
    """What `policy` holds for a one-shot program here, read back from /proc of a live one (once per process)."""
    sleeper = shutil.which("sleep")
    argv = [sleeper, "30"] if sleeper else [sys.executable, "-c", "import time; time.sleep(30)"]
    runtime = Path(tempfile.mkdtemp(prefix=f"tfk-{os.getpid()}-probe-"))
    cgroups = CgroupSet(64, 256)
    popen = None
    try:
        launch = plan(policy, runtime / "spec.json", writable=[str(runtime)], one_shot=True)
        spec = {**launch.spec, "cgroups": [str(p) for p in cgroups.dirs.values()],
                "rlimits": rlimits_spec(proc.ProcLimits(memory_mb=256, max_processes=64)), "cwd": str(runtime),
                "exec_argv": argv}
        (runtime / "spec.json").write_text(json.dumps(spec))
        popen = subprocess.Popen(launch.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, env=scrubbed_env(runtime), start_new_session=True)
        pid = _wait_for_exec(popen.pid, argv[0])
        if pid is None:
            popen.kill()
            err = popen.communicate()[1].decode(errors="replace").strip()
            raise refusal(err.splitlines()[-1] if err else "the isolated probe did not start")
        iso = verify(pid, cgroups, None, launch.mechanism.name)
        gaps = iso.gaps(policy.network, not policy.hide_home)
        if gaps:
            raise refusal(f"{launch.mechanism.name} started, but {', '.join(gaps)}")
        if iso.writable_mounts is not None:  # the probe's folder is gone by the time anyone reads this
            iso = dataclasses.replace(iso, writable_mounts=tuple(
                WORKDIR_LABEL if m == str(runtime) else m for m in iso.writable_mounts))
        return iso
    finally:
        if popen is not None:
            proc.kill_group(popen.pid)
            popen.wait()
        cgroups.destroy()
        shutil.rmtree(runtime, ignore_errors=True)


def _wait_for_exec(top: int, exe: str, timeout: float = 10.0) -> int | None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            for p in psutil.Process(top).children(recursive=True):
                if p.exe() == os.path.realpath(exe) or (p.cmdline()[:1] == [exe]):
                    return p.pid
        except psutil.Error:
            return None
        time.sleep(0.005)
    return None
