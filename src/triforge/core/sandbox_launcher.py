"""Launcher for a sandboxed IPython kernel: applies limits to itself, then becomes the kernel.

Run as a script (``python sandbox_launcher.py SPEC_JSON``), possibly under ``unshare``; it
imports nothing from triforge so that the kernel's module namespace stays clean. Steps, in order:
join the cgroups, bring the private loopback up, set rlimits, make the filesystem read-only but
for a few writable paths (in its own mount namespace), drop every capability, then (inside a PID
namespace) fork: the parent stays as PID 1 and only reaps orphans, the child runs ipykernel.
"""

import json
import os
import sys

# The script's own directory (triforge/core) must not shadow modules such as `trace`.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import resource  # noqa: E402
import signal  # noqa: E402

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def _join_cgroups(paths: list[str]) -> None:
    for path in paths:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))


def _loopback_up() -> None:
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def _readonly_except(writable: list[str]) -> None:
    """Make every mount read-only except `writable` (this is a private mount namespace)."""
    ctypes, libc = _libc()
    ms_bind, ms_rec = 4096, 16384
    at_fdcwd, at_recursive, attr_rdonly = -100, 0x8000, 0x1
    nr_mount_setattr = 442  # the same number on x86_64 and arm64

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    def setattr_(path: str, set_: int, clr: int) -> None:
        attr = MountAttr(set_, clr, 0, 0)
        if libc.syscall(nr_mount_setattr, at_fdcwd, path.encode(), at_recursive, ctypes.byref(attr), ctypes.sizeof(attr)):
            raise OSError(ctypes.get_errno(), f"mount_setattr {path}")

    for path in writable:  # a bind mount of its own, so that it can stay writable
        if os.path.isdir(path) and libc.mount(path.encode(), path.encode(), None, ms_bind | ms_rec, None):
            raise OSError(ctypes.get_errno(), f"bind {path}")
    setattr_("/", attr_rdonly, 0)
    for path in writable:
        if os.path.isdir(path):
            setattr_(path, 0, attr_rdonly)


def _drop_capabilities() -> None:
    """Give up every capability for good: uid 0 stays, its power over the machine does not."""
    ctypes, libc = _libc()
    pr_capbset_drop, pr_cap_ambient, pr_cap_ambient_clear_all, pr_set_no_new_privs = 24, 47, 4, 38
    for cap in range(64):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) and ctypes.get_errno() == 22:  # EINVAL: past the last cap
            break
    libc.prctl(pr_cap_ambient, pr_cap_ambient_clear_all, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    data = (Data * 2)()
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), data):
        raise OSError(ctypes.get_errno(), "capset")
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "no_new_privs")


def _set_rlimits(limits: dict[str, list[int]]) -> None:
    for name, (soft, hard) in limits.items():
        res = getattr(resource, name)
        cap = resource.getrlimit(res)[1]
        if cap != resource.RLIM_INFINITY:  # never ask for more than we may have (unprivileged runs)
            soft, hard = min(soft, cap), min(hard, cap)
        resource.setrlimit(res, (soft, hard))


def _reap_until(child: int, lifeline: int | None) -> None:
    """PID 1 of the namespace: reap every orphan; leave with the kernel's status.

    `lifeline` is the read end of a pipe whose write end only the host process holds: EOF means
    the host is gone, and leaving then takes the whole namespace down with it.
    """
    import select

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    watched = [wake_r] + ([lifeline] if lifeline is not None else [])
    while True:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                os._exit(1)
            if pid == 0:
                break
            if pid == child:
                if os.WIFSIGNALED(status):
                    os._exit(128 + os.WTERMSIG(status))
                os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
        ready, _, _ = select.select(watched, [], [], 1.0)
        if lifeline in ready and not os.read(lifeline, 1):
            os._exit(1)
        if wake_r in ready:
            os.read(wake_r, 4096)


def _run_kernel(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = ["ipykernel_launcher", *argv]
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    _join_cgroups(spec.get("cgroups", []))
    if spec.get("loopback_up"):
        try:
            _loopback_up()
        except OSError as exc:  # the kernel still runs, only without a private loopback
            print(f"sandbox launcher: could not bring loopback up: {exc}", file=sys.stderr)
    _set_rlimits(spec.get("rlimits", {}))
    if spec.get("writable") is not None:
        try:
            _readonly_except(spec["writable"])
        except OSError as exc:
            print(f"sandbox launcher: filesystem left writable: {exc}", file=sys.stderr)
    if spec.get("drop_capabilities"):
        try:
            _drop_capabilities()
        except OSError as exc:
            print(f"sandbox launcher: capabilities not dropped: {exc}", file=sys.stderr)
    os.chdir(spec["cwd"])
    lifeline = spec.get("lifeline")
    if spec.get("reaper"):
        child = os.fork()
        if child:
            _reap_until(child, lifeline)
    if lifeline is not None:
        os.close(lifeline)
    _run_kernel(spec["kernel_argv"])


if __name__ == "__main__":
    main()
