"""One isolation policy and one launcher for all untrusted code (kernel cells, graded programs, references).

The policy says what the code may reach; `mechanism()` says how this machine can hold it:
namespaces as root (keeping cgroups), unprivileged user namespaces otherwise, or nothing. Where
nothing works, untrusted code is refused unless the policy was explicitly turned off
(`--isolation none`, `TRIFORGE_ISOLATION=none`). What is in force is read back from /proc after
start (`confine.host.verify`), never assumed from what was asked.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from triforge.confine.seccomp import seccomp_filter
from triforge.core.errors import UserError

ENV_VAR = "TRIFORGE_ISOLATION"
LAUNCHER = Path(__file__).with_name("launcher.py")
# private, empty and writable inside; the host's own stay untouched
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")
# covered by an empty read-only folder: where the host's daemons keep their Unix sockets (D-Bus, systemd,
# docker, containerd, podman, the user's ssh and gpg agents under /run/user/UID). A read-only mount does not
# stop connect(), and AF_UNIX must stay open (the kernel's own ZeroMQ sockets), so they must not be seen.
HOST_SOCKETS = ("/run", "/var/run")
# The device nodes a program sees: /dev is a fresh read-only tmpfs with only these bound in (and its fd,
# stdin, stdout, stderr links, and the private /dev/shm). The host's /dev holds raw disks and /dev/kvm, which
# uid 0 opens without any capability (a read-only mount does not stop writing to a device).
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts")
# Each private temporary folder is a tmpfs of at most this many MiB (TRIFORGE_TMP_MB): its pages are memory
# that RLIMIT_AS does not count, and without a memory cgroup (an ordinary user) nothing else would bound them.
TMP_ENV = "TRIFORGE_TMP_MB"
DEFAULT_TMP_MB = 1024
CONFINEMENT_FAILED = 125  # the launcher's exit code when a step of a strict policy failed
_NAMESPACES = ("--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--uts", "--ipc")


class IsolationUnavailable(UserError):
    """Untrusted code was about to run without the isolation the policy asks for."""


@dataclass(frozen=True)
class IsolationPolicy:
    """What untrusted code may reach. The default: loopback only, the host read-only, the user's home
    hidden, a private /tmp, its own PID namespace. Every widening is a field, so a run records it."""

    enabled: bool = True  # False: run unprotected (`--isolation none`); never the default
    network: bool = False  # keep the host's network
    hide_home: bool = True  # cover the user's home with an empty read-only directory
    read_only: tuple[str, ...] = ()  # host paths visible read-only even where hidden (data handed in)
    writable: tuple[str, ...] = ()  # host paths writable besides the workdir
    host_devices: bool = False  # see the host's /dev (a GPU process); else a /dev of DEV_NODES only

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **fields: Any) -> IsolationPolicy:
        """The policy with `TRIFORGE_ISOLATION` applied (`none` turns it off; `auto` or unset keeps it)."""
        value = (environ if environ is not None else os.environ).get(ENV_VAR, "auto").strip().lower()
        if value not in ("auto", "none", ""):
            raise UserError(f"{ENV_VAR}={value!r}: use 'auto' (the default) or 'none'")
        return cls(enabled=value != "none", **fields)

    def widened(self, *, network: bool = False, read_only: tuple[str, ...] = (),
                writable: tuple[str, ...] = (), host_devices: bool = False) -> IsolationPolicy:
        return replace(self, network=self.network or network, read_only=tuple(sorted({*self.read_only, *read_only})),
                       writable=tuple(sorted({*self.writable, *writable})),
                       host_devices=self.host_devices or host_devices)

    def record(self) -> dict[str, Any]:
        """Plain data for a run's record: the policy as asked, with the mechanism that holds it here."""
        if not self.enabled:
            return {**asdict(self), "mechanism": "none (turned off)", "seccomp": "none (turned off)"}
        return {**asdict(self), "mechanism": mechanism().name, "seccomp": seccomp_filter().describe()}


@dataclass(frozen=True)
class Mechanism:
    name: str  # "namespaces (root)", "user namespaces", "none"
    unshare: tuple[str, ...] = ()  # the command prefix, without the program
    why_not: str = ""  # when none: what failed

    @property
    def available(self) -> bool:
        return bool(self.unshare)

    @property
    def user_namespace(self) -> bool:
        return "--user" in self.unshare


@functools.cache
def mechanism() -> Mechanism:
    """The strongest way to isolate that works on this machine, probed once per process."""
    exe = shutil.which("unshare")
    if exe is None:
        return Mechanism("none", why_not="util-linux `unshare` is not installed")
    tries = [("user namespaces", (exe, "--user", "--map-root-user", *_NAMESPACES))]
    if os.geteuid() == 0:  # root keeps its cgroups: no user namespace needed
        tries.insert(0, ("namespaces (root)", (exe, *_NAMESPACES)))
    why = ""
    for name, prefix in tries:
        try:
            done = subprocess.run([*prefix, "true"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = str(exc)
            continue
        if done.returncode == 0:
            return Mechanism(name, prefix)
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    return Mechanism("none", why_not=f"`unshare --user --map-root-user` failed ({why}): unprivileged user "
                     "namespaces are disabled here")


def refusal(why: str) -> IsolationUnavailable:
    return IsolationUnavailable(
        f"model-written code not run: no isolation on this machine ({why}); see `triforge doctor`, "
        f"or run it unprotected with --isolation none ({ENV_VAR}=none)")


@functools.cache
def warn_unprotected(why: str) -> None:
    """One line on stderr, once per process, when untrusted code runs without isolation by choice."""
    print(f"triforge: WARNING: model-written code runs WITHOUT isolation ({why})", file=sys.stderr)


def interpreter_paths() -> list[str]:
    """What a Python program needs to read where the home is hidden: the interpreter and its packages."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
             str(LAUNCHER.parent.parent.parent)}
    paths.update(p for p in sys.path if p and os.path.isabs(p))
    return sorted(p for p in {os.path.realpath(p) for p in paths} if os.path.exists(p))


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def filesystem_spec(policy: IsolationPolicy, writable: list[str]) -> dict[str, Any]:
    """The launcher's `filesystem` entry: what to cover, what to bind back read-only or writable."""
    rw = sorted({os.path.realpath(p) for p in [*writable, *policy.writable]})
    ro = sorted({os.path.realpath(p) for p in [*interpreter_paths(), *policy.read_only]} - set(rw))
    cover = {p: "rw" for p in PRIVATE_TMP}
    home = os.path.realpath(os.path.expanduser("~"))
    if policy.hide_home and home != "/" and os.path.isdir(home):
        cover[home] = "ro"
    for path in HOST_SOCKETS:
        if os.path.isdir(real := os.path.realpath(path)):
            cover.setdefault(real, "ro")
    # an explicit widening wins: a kept path holding a covered one leaves that one uncovered
    cover = {c: m for c, m in cover.items() if not any(_under(c, k) and k != c for k in rw + ro)}
    cover = {c: m for c, m in cover.items() if not any(_under(c, o) and o != c for o in cover)}
    # every other socket a host process listens on (LXD's under /var/snap, another user's agent) is masked
    # (seen where no cover hides it, or where a kept path shows it again; the run's own writable places aside)
    masks = [p for p in host_sockets() if (not any(_under(p, c) for c in cover) or any(_under(p, k) for k in ro))
             and not any(_under(p, k) for k in rw)]
    dev = None if policy.host_devices else [f"/dev/{n}" for n in DEV_NODES if os.path.lexists(f"/dev/{n}")]
    return {"cover": cover, "keep_ro": ro, "keep_rw": rw, "tmp_size_mb": tmp_size_mb(), "mask_sockets": masks,
            "dev": dev}


def host_sockets() -> list[str]:
    """The paths of the Unix sockets bound in this network namespace (/proc/net/unix) that exist as sockets."""
    try:
        with open("/proc/net/unix") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return []
    found = set()
    for row in rows:
        cols = row.split(maxsplit=7)
        if len(cols) == 8 and cols[7].startswith("/"):
            try:
                if stat.S_ISSOCK(os.lstat(cols[7]).st_mode):
                    found.add(cols[7])
            except OSError:
                continue
    return sorted(found)


def tmp_size_mb() -> int:
    """The size of each private temporary folder, in MiB (TRIFORGE_TMP_MB, default 1024)."""
    raw = os.environ.get(TMP_ENV, "")
    try:
        value = int(raw) if raw else DEFAULT_TMP_MB
    except ValueError:
        raise UserError(f"{TMP_ENV}={raw!r}: give a whole number of MiB (the size of each private /tmp)") from None
    if value < 1:
        raise UserError(f"{TMP_ENV}={raw!r}: give at least 1 (MiB)")
    return value


@dataclass
class LaunchPlan:
    """How to start the launcher: the command, and the parts of its spec that isolation decides."""

    argv: list[str]
    spec: dict[str, Any] = field(default_factory=dict)
    mechanism: Mechanism = field(default_factory=lambda: Mechanism("none"))


def plan(policy: IsolationPolicy, spec_path: Path, *, writable: list[str], one_shot: bool = False) -> LaunchPlan:
    """The launch command for `policy`; raises `IsolationUnavailable` when it cannot be held and was not turned off.

    `one_shot`: the launcher only execs a program, so it starts without `site` (about 10 ms less).
    """
    mech = mechanism()
    cmd = [sys.executable, *(["-I", "-S"] if one_shot else []), str(LAUNCHER), str(spec_path)]
    if not policy.enabled:
        warn_unprotected("isolation turned off: --isolation none")
        return LaunchPlan(cmd, {"strict": False, "reaper": False, "loopback_up": False, "filesystem": None,
                                "drop_capabilities": False}, Mechanism("none", why_not="turned off"))
    if not mech.available:
        raise refusal(mech.why_not)
    # the launcher mounts the new /proc itself, keeping what the host mounted inside its own (see
    # `_mount_proc` there); the probe above ran with --mount-proc, so mounting a /proc works here
    prefix = [{"--mount-proc": "--mount"}.get(a, a) for a in mech.unshare if not (policy.network and a == "--net")]
    spec = {
        "host_mount_namespace": os.readlink("/proc/self/ns/mnt"),  # the launcher refuses to mount in it
        "strict": True,
        "reaper": True,
        "loopback_up": not policy.network,
        "mount_proc": "--mount-proc" in mech.unshare,
        "filesystem": filesystem_spec(policy, writable),
        "drop_capabilities": True,
        "seccomp_bpf": (seccomp_filter().bpf or b"").hex() or None,  # None where libseccomp is missing
        # SysV shared memory of the sandbox's own IPC namespace: a detached segment's pages belong to no
        # process, so the launcher bounds them by this (a private /tmp's size) or the memory rlimit if lower
        "sysv_shm_mb": tmp_size_mb() if "--ipc" in mech.unshare else None,
    }
    return LaunchPlan([*prefix, *cmd], spec, mech)
