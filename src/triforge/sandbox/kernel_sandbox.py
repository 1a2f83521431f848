"""A hardened, persistent IPython kernel for agents that think by running code.

`KernelSandbox.execute` never raises for what the code does: a hang, a crash, a memory or fork
bomb, a flood of output all come back as an `ExecResult`, and the sandbox stays usable (with
`restarted=True` when the kernel's state had to be thrown away). See docs/sandbox.md.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triforge.confine import proc
from triforge.confine.host import Isolation
from triforge.confine.isolation import IsolationPolicy
from triforge.confine.limits import SandboxLimits
from triforge.confine.tree import folder_mb, outermost
from triforge.core.errors import UserError
from triforge.sandbox.kernel_process import KernelProcess, SandboxError, writable_in
from triforge.sandbox.output import CappedText, strip_ansi

if TYPE_CHECKING:
    from triforge.sandbox.pool import KernelPool

__all__ = ["ExecError", "ExecResult", "KernelSandbox", "SandboxError", "SandboxLimits"]

DEFAULT_OUTPUT_LIMIT = 20_000
_DEFAULT = SandboxLimits(isolation=IsolationPolicy())  # defaults only: importing reads no environment


@dataclass
class ExecError:
    name: str
    value: str
    traceback: str


@dataclass
class ExecResult:
    ok: bool
    stdout: str
    stderr: str
    result: str | None  # text form of the cell's last expression
    error: ExecError | None
    timed_out: bool
    restarted: bool  # the kernel was replaced: every variable and import is gone
    duration_s: float
    truncated: bool = False
    full_output: list[str] = field(default_factory=list)  # files holding the uncut text, when cut
    killed_processes: int = 0  # background processes the cell left running, killed afterwards
    notice: str | None = None  # what the sandbox did and why (interrupt, restart, cause of death)
    isolation: Isolation | None = None

    @property
    def state_lost(self) -> bool:
        return self.restarted


class KernelSandbox:
    """A persistent, resource-limited IPython kernel in its own working directory."""

    def __init__(
        self,
        workdir: str | Path | None = None,
        *,
        memory_mb: int | None = _DEFAULT.memory_mb,
        cpu_seconds: int | None = _DEFAULT.cpu_seconds,
        max_processes: int | None = _DEFAULT.max_processes,
        max_file_mb: int | None = _DEFAULT.max_file_mb,
        folder_mb: int | None = _DEFAULT.folder_mb,
        network: bool = False,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        timeout: float = 60.0,
        interrupt_grace: float = 1.0,
        save_full_output: bool = True,
        kill_background: bool = True,
        env: dict[str, str] | None = None,
        pool: KernelPool | None = None,
        isolation: IsolationPolicy | None = None,
    ) -> None:
        limits = SandboxLimits(memory_mb, cpu_seconds, max_processes, max_file_mb, network,
                               tuple(sorted((env or {}).items())), isolation or IsolationPolicy.from_env(),
                               folder_mb)
        if pool is not None and pool.limits != limits:
            raise UserError("the sandbox's limits differ from its pool's: create it with pool.sandbox() instead")
        self.limits = limits
        self.output_limit = output_limit
        self.timeout = timeout
        self.interrupt_grace = interrupt_grace
        self.save_full_output = save_full_output
        self.kill_background = kill_background
        self._pool = pool
        self._owns_workdir = workdir is None
        self.workdir = Path(workdir).resolve() if workdir is not None else None
        if self.workdir is not None:
            self.workdir.mkdir(parents=True, exist_ok=True)
        self._cells = itertools.count(1)
        self._since: dict[str, float] = {}
        self._since_kernel: KernelProcess | None = None
        self._kernel: KernelProcess | None = None
        try:
            self._kernel = self._new_kernel()
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------------

    def _new_kernel(self) -> KernelProcess:
        kernel = None
        # an isolated pooled kernel sees only its own folder: a sandbox with a folder already (given,
        # or kept from its first kernel across a restart) needs a kernel started for that folder
        if self._pool is not None and (self.workdir is None or not self.limits.policy().enabled):
            try:
                kernel = self._pool.take()
            except SandboxError:  # a closed or failing pool: start one here instead
                kernel = None
        if kernel is not None:
            if self.workdir is not None and not writable_in(kernel, self.workdir):
                # a pooled kernel's writable mounts are fixed at launch: this workdir needs its own
                shutil.rmtree(kernel.cwd, ignore_errors=True)
                kernel.kill()
                return KernelProcess(self.limits, self.workdir)
            if self.workdir is None:
                self.workdir = kernel.cwd
            elif kernel.cwd != self.workdir:
                shutil.rmtree(kernel.cwd, ignore_errors=True)
                try:
                    kernel.run_silent(f"import os as _o; _o.chdir({str(self.workdir)!r}); del _o")
                except BaseException:
                    kernel.kill()
                    raise
                kernel.cwd = self.workdir
            return kernel
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="triforge-sandbox-"))
        return KernelProcess(self.limits, self.workdir)

    def _replace_kernel(self) -> None:
        if self._kernel is not None:
            self._kernel.kill()
        self._kernel = None
        self._kernel = self._new_kernel()

    @property
    def isolation(self) -> Isolation:
        """The isolation in force for the current kernel, as read back from /proc."""
        if self._kernel is None or self._kernel.isolation is None:
            raise SandboxError("the sandbox is closed")
        return self._kernel.isolation

    @property
    def kernel_pid(self) -> int:
        """Host PID of the process running the kernel (for signals and inspection)."""
        self._check_open()
        assert self._kernel is not None
        return self._kernel.kernel_pid

    def processes(self) -> list[int]:
        """Host PIDs of every live process that belongs to this sandbox, the kernel's own included."""
        self._check_open()
        assert self._kernel is not None
        return sorted(self._kernel.members())

    def reset(self) -> None:
        """Throw the kernel's state away: a fresh kernel in the same working directory."""
        self._check_open()
        self._replace_kernel()

    def close(self) -> None:
        if self._kernel is not None:
            self._kernel.kill()
            self._kernel = None
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KernelSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._kernel is None:
            raise SandboxError("the sandbox is closed")

    # -- execution -------------------------------------------------------------------------------

    def execute(self, code: str, timeout: float | None = None) -> ExecResult:
        """Run `code` in the kernel; interrupt at `timeout` seconds, restart if that is not enough."""
        self._check_open()
        assert self._kernel is not None
        earlier = None
        if not self._kernel.alive():  # died between cells (killed from outside, a background thread...)
            earlier = f"the kernel had {self._kernel.exit_description()} since the last cell; restarted, state lost"
            self._replace_kernel()
        result = self._execute(code, self.timeout if timeout is None else timeout)
        if earlier:
            result.restarted = True
            result.ok = False
            result.notice = f"{earlier}; {result.notice}" if result.notice else earlier
        return result

    def _writable(self, kernel: KernelProcess) -> list[str]:
        """The host folders a cell may write, the working folder first: the folder limit holds them together."""
        assert self.workdir is not None
        return [str(self.workdir), *(kernel.writable or ())]

    def _folder_since(self, kernel: KernelProcess) -> dict[str, float]:
        """Sizes to count a cell's folder growth from: the working folder's at this sandbox's first cell, the
        kernel's own folders' (its HOME) at that kernel's first cell. Growth adds up over cells, so a limit
        of N MiB is N for the sandbox, not N per cell."""
        work = os.path.realpath(str(self.workdir))
        if self._since_kernel is not kernel:
            self._since_kernel, self._since = kernel, {k: v for k, v in self._since.items() if k == work}
        for path in outermost(self._writable(kernel)):
            if path not in self._since:
                self._since[path] = folder_mb(path)
        return self._since

    def _execute(self, code: str, timeout: float) -> ExecResult:
        kernel = self._kernel
        assert kernel is not None
        cell = next(self._cells)
        spill = (self.workdir / ".sandbox-output") if (self.save_full_output and self.workdir) else None
        out = CappedText(self.output_limit, spill / f"cell-{cell}-stdout.txt" if spill else None)
        err = CappedText(self.output_limit, spill / f"cell-{cell}-stderr.txt" if spill else None)
        state = _CellState()
        cpu_budget = self.limits.cpu_seconds
        cpu_at_start = kernel.cpu_seconds() if cpu_budget else 0.0
        forks_refused = kernel.cgroups.counter("pids", "pids.events", "max")
        per_uid_limit = kernel.isolation.rlimits.get("RLIMIT_NPROC") if kernel.isolation and "pids" not in \
            kernel.cgroups.dirs else None
        ooms = kernel.cgroups.counter("memory", "memory.oom_control", "oom_kill")
        # Without a memory cgroup (not root) RLIMIT_AS bounds each process alone: the tree is measured instead,
        # while the kernel has children (alone, RLIMIT_AS holds it). And the working folder's growth.
        limited = self.workdir is not None and self.limits.folder_mb
        watch = proc.watches(lambda: kernel.members() if kernel.strays() else set(),
                             tree_memory_mb=self.limits.memory_mb if "memory" not in kernel.cgroups.dirs else None,
                             folder=(self._writable(kernel), self.limits.folder_mb) if limited else None,
                             holders=kernel.members, since=self._folder_since(kernel) if limited else None)
        t0 = time.monotonic()
        msg_id = kernel.send_execute(code)
        deadline = t0 + timeout
        interrupted_at: float | None = None
        next_check = t0 + 0.1
        notice = None
        peak_tasks = 0  # the most tasks the kernel's tree held at a check (RLIMIT_NPROC path)
        while not (state.replied and state.idle):
            if not kernel.alive():
                for ch, m in kernel.recv(0):
                    state.handle(ch, m, msg_id, out, err, self.output_limit)
                notice = f"kernel {kernel.exit_description()}"
                if kernel.cgroups.counter("memory", "memory.oom_control", "oom_kill") > ooms:
                    notice += " (out of memory: the memory limit was reached)"
                break
            now = time.monotonic()
            if now >= next_check:  # a fork bomb starves the kernel: do not wait for its answer
                next_check = now + 0.1
                if kernel.cgroups.counter("pids", "pids.events", "max") > forks_refused:
                    notice = f"the process limit ({self.limits.max_processes} tasks) was reached"
                    break
                peak_tasks = max(peak_tasks, kernel.task_count() if per_uid_limit else 0)
                if per_uid_limit and peak_tasks >= per_uid_limit * 3 // 4:
                    # RLIMIT_NPROC counts the user's other tasks too: forks fail before the tree holds them all
                    notice = f"the process limit ({per_uid_limit} tasks, RLIMIT_NPROC) was nearly reached"
                    break
                if cpu_budget and kernel.cpu_seconds() - cpu_at_start > cpu_budget:
                    notice = f"the CPU-time limit of {cpu_budget} s per cell was reached"
                    break
                if watch is not None and (reason := watch()) is not None:
                    notice = reason
                    break
            if interrupted_at is None and now >= deadline:
                kernel.interrupt()
                interrupted_at = now
            if interrupted_at is not None and now >= interrupted_at + self.interrupt_grace:
                notice = f"no answer {self.interrupt_grace:g} s after an interrupt at the {timeout:g} s deadline"
                break
            until = deadline if interrupted_at is None else interrupted_at + self.interrupt_grace
            for ch, m in kernel.recv(min(until - now, 0.1)):
                state.handle(ch, m, msg_id, out, err, self.output_limit)
        timed_out = interrupted_at is not None
        if per_uid_limit and "process limit" not in (notice or "") and (
                peak_tasks >= per_uid_limit * 3 // 4 or _fork_refused(state.error)):
            # the limit was hit although no check saw it at the moment (a starved machine, a quick bomb): say so
            hit = f"the process limit ({per_uid_limit} tasks, RLIMIT_NPROC) was reached"
            notice = f"{notice}; {hit}" if notice else hit
        restarted = notice is not None
        killed = 0
        if not restarted:
            if self.kill_background:
                killed = kernel.kill_strays()
            if kernel.cgroups.counter("pids", "pids.events", "max") > forks_refused:
                restarted = True  # its unreaped children would keep the process count at the limit
                notice = f"the process limit ({self.limits.max_processes} tasks) was reached"
        if restarted:
            killed = max(killed, len(kernel.strays()))
            self._replace_kernel()
            notice = f"{notice}; kernel restarted, its state is lost"
            if state.error is None:
                state.error = ExecError("KernelRestarted", notice, "")
        elif timed_out:
            notice = f"interrupted at the {timeout:g} s deadline; kernel state kept"
        if killed:
            extra = f"killed {killed} background process(es) the cell left running"
            notice = f"{notice}; {extra}" if notice else extra
        full = [str(p) for p in (out.spilled_to, err.spilled_to) if p is not None]
        return ExecResult(
            ok=state.status == "ok" and not timed_out and not restarted,
            stdout=out.text(),
            stderr=err.text(),
            result=state.result,
            error=state.error,
            timed_out=timed_out,
            restarted=restarted,
            duration_s=time.monotonic() - t0,
            truncated=out.truncated or err.truncated or state.result_truncated,
            full_output=full,
            killed_processes=killed,
            notice=notice,
            isolation=self._kernel.isolation if self._kernel else None,
        )


def _fork_refused(error: ExecError | None) -> bool:
    """The cell failed on a fork the process limit refused (EAGAIN from fork, BlockingIOError in Python)."""
    return error is not None and error.name == "BlockingIOError" and "fork" in (error.traceback + error.value)


@dataclass
class _CellState:
    replied: bool = False
    idle: bool = False
    status: str | None = None
    result: str | None = None
    result_truncated: bool = False
    error: ExecError | None = None

    def handle(
        self, channel: str, msg: dict[str, Any], msg_id: str, out: CappedText, err: CappedText, limit: int
    ) -> None:
        if msg["parent_header"].get("msg_id") != msg_id:
            return
        kind, content = msg["msg_type"], msg["content"]
        if channel == "shell":
            self.replied = True
            self.status = content.get("status")
            return
        if kind == "stream":
            (out if content.get("name") == "stdout" else err).add(content.get("text", ""))
        elif kind == "execute_result":
            text = CappedText(limit)
            text.add(str(content.get("data", {}).get("text/plain", "")))
            self.result, self.result_truncated = text.text(), text.truncated
        elif kind == "display_data":
            data = content.get("data", {})
            out.add(str(data.get("text/plain", f"<display {', '.join(data)}>")) + "\n")
        elif kind == "error":
            tb = CappedText(limit)
            tb.add(strip_ansi("\n".join(content.get("traceback", []))))
            value = content.get("evalue", "")
            if content.get("ename") == "StdinNotImplementedError":
                value += " input() cannot be answered in this sandbox: put the data in the code instead."
            self.error = ExecError(content.get("ename", ""), value, tb.text())
        elif kind == "status" and content.get("execution_state") == "idle":
            self.idle = True
