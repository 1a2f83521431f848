"""What isolation this machine allows, cgroups for one sandbox, and checks of what is in force.

Nothing here claims an isolation because it was asked for: `verify` reads the kernel process's
namespaces, cgroups and rlimits back from /proc after it started.
"""

from __future__ import annotations

import functools
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from triforge.confine.seccomp import seccomp_filter

_CGROUP_ROOT = Path("/sys/fs/cgroup")


def _own_cgroup_dir(controller: str) -> Path | None:
    """Where this process sits in a cgroup-v1 controller's hierarchy, if that controller is mounted."""
    mount = _CGROUP_ROOT / controller
    if not (mount / "cgroup.procs").exists():
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return mount / path.lstrip("/")
    return None


@functools.cache
def writable_controllers() -> tuple[str, ...]:
    """cgroup-v1 controllers (of pids, memory, cpuacct) under which this process may create a child group."""
    usable = []
    for controller in ("pids", "memory", "cpuacct"):
        base = _own_cgroup_dir(controller)
        if base is None:
            continue
        probe = base / f"triforge-probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError:
            continue
        usable.append(controller)
    return tuple(usable)


def _remove_stale(base: Path) -> None:
    """Remove empty groups left by triforge processes that died without cleaning up."""
    try:
        entries = list(base.glob("triforge-*-*"))
    except OSError:
        return
    for path in entries:
        owner = path.name.split("-")[1]
        if owner.isdigit() and not psutil.pid_exists(int(owner)):
            try:
                path.rmdir()
            except OSError:
                pass


class CgroupSet:
    """One child cgroup per usable controller, for one kernel; removed on `destroy`."""

    _cleaned: set[Path] = set()

    def __init__(self, max_processes: int | None, memory_mb: int | None) -> None:
        name = f"triforge-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        self.dirs: dict[str, Path] = {}
        for controller in writable_controllers():
            base = _own_cgroup_dir(controller)
            if base is None or (controller == "memory" and not memory_mb):
                continue
            if base not in CgroupSet._cleaned:
                CgroupSet._cleaned.add(base)
                _remove_stale(base)
            path = base / name
            try:
                path.mkdir()
                if controller == "pids" and max_processes:
                    (path / "pids.max").write_text(str(max_processes))
                if controller == "memory" and memory_mb:
                    (path / "memory.limit_in_bytes").write_text(str(memory_mb << 20))
            except OSError:
                _rmdir(path)
                continue
            self.dirs[controller] = path

    def pids(self) -> set[int]:
        for path in self.dirs.values():
            try:
                return {int(p) for p in (path / "cgroup.procs").read_text().split()}
            except OSError:
                return set()
        return set()

    def cpu_ns(self) -> int | None:
        """CPU time used by every process of the group so far, in ns (None without cpuacct)."""
        path = self.dirs.get("cpuacct")
        if path is None:
            return None
        try:
            return int((path / "cpuacct.usage").read_text())
        except (OSError, ValueError):
            return None

    def counter(self, controller: str, file: str, key: str) -> int:
        """A counter such as pids.events `max` or memory.oom_control `oom_kill`; 0 when absent."""
        path = self.dirs.get(controller)
        if path is None:
            return 0
        try:
            for line in (path / file).read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
        except (OSError, ValueError):
            pass
        return 0

    def kill_all(self, deadline_s: float = 3.0) -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            left = self.pids()
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    def destroy(self) -> None:
        self.kill_all()
        for path in self.dirs.values():
            _rmdir(path)
        self.dirs.clear()


def _rmdir(path: Path) -> None:
    for _ in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


@dataclass(frozen=True)
class Isolation:
    """The isolation actually in force for a kernel, read back from /proc after it started."""

    network_isolated: bool  # own network namespace with no interface but loopback
    pid_namespace: bool  # cannot see or signal host processes; all its processes die with it
    process_limit: str  # e.g. "pids cgroup: 256" or "none (root ignores RLIMIT_NPROC)"
    memory_limit: str  # e.g. "RLIMIT_AS 4096 MiB + memory cgroup 4096 MiB"
    cpu_limit: str = "none"  # e.g. "600 s per cell, kernel and children (cpuacct cgroup)"
    capabilities_dropped: bool = False  # no effective and no bounding capabilities left
    writable_mounts: tuple[str, ...] | None = None  # None: the whole host filesystem is writable
    rlimits: dict[str, int | None] = field(default_factory=dict)  # soft values; None = unlimited
    notes: tuple[str, ...] = ()
    private_tmp: bool = False  # /tmp is the sandbox's own, not the host's
    home_hidden: bool = False  # the user's home is covered (only what the run needs is bound back)
    user_namespace: bool = False  # runs in an unprivileged user namespace (no root on the host needed)
    mechanism: str = "none"
    seccomp: bool = False  # a seccomp filter is installed (the second layer; its absence is a note, not a gap)
    own_dev: bool = False  # a /dev of its own (the usual nodes only), not the host's
    run_hidden: bool = False  # /run (the host daemons' sockets) is covered

    def gaps(self, network_allowed: bool = False, home_allowed: bool = False) -> list[str]:
        """What the policy asks for and is not in force (empty when it holds)."""
        out = []
        if not network_allowed and not self.network_isolated:
            out.append("network reachable")
        if not self.pid_namespace:
            out.append("host processes visible")
        if self.writable_mounts is None:
            out.append("host filesystem writable")
        if not self.private_tmp:
            out.append("host /tmp shared")
        if not home_allowed and not self.home_hidden:
            out.append("home readable")
        if not self.capabilities_dropped:
            out.append("capabilities kept")
        return out

    def confinement(self) -> str:
        """What the code can reach (the limits aside)."""
        net = "isolated (own namespace, loopback only)" if self.network_isolated else "NOT isolated"
        pid = "own PID namespace" if self.pid_namespace else "host PID namespace"
        fs = "writable: whole host" if self.writable_mounts is None else _writable_text(self.writable_mounts)
        caps = "no capabilities" if self.capabilities_dropped else "capabilities kept"
        tmp = "private /tmp" if self.private_tmp else "host /tmp"
        home = "home hidden" if self.home_hidden else "home visible"
        sec = "seccomp filter" if self.seccomp else "no seccomp filter"
        dev = ("own /dev" if self.own_dev else "host /dev") + ("; /run hidden" if self.run_hidden else "")
        return f"mechanism: {self.mechanism}; network: {net}; {pid}; {fs}; {tmp}; {home}; {dev}; {caps}; {sec}"

    def summary(self) -> str:
        return (f"{self.confinement()}; processes: {self.process_limit}; memory: {self.memory_limit}; "
                f"cpu: {self.cpu_limit}")


def _writable_text(mounts: tuple[str, ...]) -> str:
    """`writable: only <working folders> and a private /tmp, ...`: the sandbox's own /proc is not host state."""
    private = [m for m in mounts if m in ("/tmp", "/var/tmp", "/dev/shm")]
    own = [m for m in mounts if m not in private and m != "/proc" and not m.startswith("/proc/")]
    parts = [", ".join(own)] if own else []
    if private:
        parts.append(f"a private {', '.join(private)}")
    return f"writable: only {' and '.join(parts)}" if parts else "writable: nothing"


_RLIMITS = {
    "RLIMIT_AS": psutil.RLIMIT_AS,
    "RLIMIT_CPU": psutil.RLIMIT_CPU,
    "RLIMIT_FSIZE": psutil.RLIMIT_FSIZE,
    "RLIMIT_NPROC": psutil.RLIMIT_NPROC,
    "RLIMIT_CORE": psutil.RLIMIT_CORE,
}


def _ns(pid: int | str, kind: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return ""


def _interfaces(pid: int) -> list[str]:
    try:
        lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    except OSError:
        return ["?"]
    return [line.split(":", 1)[0].strip() for line in lines]


def verify(kernel_pid: int, cgroups: CgroupSet, cpu_seconds: int | None = None, mechanism: str = "none") -> Isolation:
    proc = psutil.Process(kernel_pid)
    rl: dict[str, int | None] = {}
    for name, res in _RLIMITS.items():
        soft = proc.rlimit(res)[0]
        rl[name] = None if soft == psutil.RLIM_INFINITY else soft
    own_net = _ns(kernel_pid, "net") not in ("", _ns("self", "net"))
    network_isolated = own_net and _interfaces(kernel_pid) == ["lo"]
    pid_ns = _ns(kernel_pid, "pid") not in ("", _ns("self", "pid"))
    notes = []
    in_pids = _member(kernel_pid, cgroups, "pids")
    pids_max = (cgroups.dirs["pids"] / "pids.max").read_text().strip() if in_pids else "max"
    if in_pids and pids_max != "max":
        process_limit = f"pids cgroup: {pids_max} tasks (threads count)"
    elif rl["RLIMIT_NPROC"] is not None and proc.uids().real != 0:
        process_limit = f"RLIMIT_NPROC {rl['RLIMIT_NPROC']} (per uid)"
    elif in_pids:
        process_limit = "none"
        notes.append("no process limit was asked for")
    else:
        process_limit = "none"
        notes.append("no process limit: no writable pids cgroup, and RLIMIT_NPROC does not bind root")
    parts = []
    if rl["RLIMIT_AS"] is not None:
        parts.append(f"RLIMIT_AS {rl['RLIMIT_AS'] >> 20} MiB")
    if _member(kernel_pid, cgroups, "memory"):
        limit = int((cgroups.dirs["memory"] / "memory.limit_in_bytes").read_text())
        parts.append(f"memory cgroup {limit >> 20} MiB")
    memory_limit = " + ".join(parts) or "none"
    if not network_isolated:
        notes.append("network is reachable from the kernel")
    caps = _capabilities_dropped(kernel_pid)
    if not caps and proc.uids().effective == 0:
        notes.append("the kernel runs as root with capabilities")
    writable = _writable_mounts(kernel_pid)
    if writable is None:
        notes.append("the host filesystem is writable from the kernel")
    if not cpu_seconds:
        cpu_limit = "none"
    elif _member(kernel_pid, cgroups, "cpuacct"):
        cpu_limit = f"{cpu_seconds} s per cell, kernel and children (cpuacct cgroup)"
    else:
        cpu_limit = f"{cpu_seconds} s per cell, kernel process only"
    private_tmp = _own_view(kernel_pid, "/tmp")
    home = os.path.realpath(os.path.expanduser("~"))
    home_hidden = _own_view(kernel_pid, home) or home == "/" or not os.path.isdir(home)  # no home to hide
    if not private_tmp:
        notes.append("the host's /tmp is shared with the kernel")
    if not home_hidden:
        notes.append(f"the user's home ({home}) is visible to the kernel")
    seccomp = _seccomp_filtered(kernel_pid)
    if not seccomp and mechanism != "none":  # turned off, nothing else holds either
        wanted = seccomp_filter()
        notes.append(wanted.describe() if not wanted.available else "the seccomp filter was not installed "
                     "(see the launcher's log)")
    return Isolation(
        network_isolated, pid_ns, process_limit, memory_limit, cpu_limit, caps, writable, rl, tuple(notes),
        private_tmp, home_hidden, _ns(kernel_pid, "user") not in ("", _ns("self", "user")), mechanism, seccomp,
        own_dev=_own_view(kernel_pid, "/dev"), run_hidden=_own_view(kernel_pid, "/run") or not os.path.isdir("/run"),
    )


def _own_view(pid: int, path: str) -> bool:
    """Whether `pid` sees another filesystem at `path` than we do (a private tmpfs over it, or nothing)."""
    try:
        os.stat(f"/proc/{pid}/root/")
        mine = os.stat(path).st_dev
    except OSError:
        return False
    try:
        return os.stat(f"/proc/{pid}/root{path}").st_dev != mine
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _seccomp_filtered(pid: int) -> bool:
    """Whether `pid` runs under a seccomp filter (`Seccomp: 2` in its status)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Seccomp:"):
                return line.split()[1] == "2"
    except (OSError, IndexError):
        pass
    return False


def _capabilities_dropped(pid: int) -> bool:
    try:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
        return int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0
    except (OSError, KeyError, ValueError):
        return False


def _writable_mounts(pid: int) -> tuple[str, ...] | None:
    """Mount points the process sees writable, or None when its root mount itself is writable."""
    try:
        lines = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    except OSError:
        return None
    rw, root_rw = [], True
    for line in lines:
        parts = line.split()
        point, opts = parts[4], parts[5].split(",")
        if point == "/":
            root_rw = "rw" in opts
        elif "rw" in opts:
            rw.append(point)
    if root_rw:
        return None
    return tuple(rw)  # nested ones too: the working folder is bound back inside the private /tmp


def _member(pid: int, cgroups: CgroupSet, controller: str) -> bool:
    path = cgroups.dirs.get(controller)
    if path is None:
        return False
    try:
        return str(pid) in (path / "cgroup.procs").read_text().split()
    except OSError:
        return False
