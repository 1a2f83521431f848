"""Launcher for untrusted code: applies limits to itself, then becomes an IPython kernel or a program.

Run as a script (``python launcher.py SPEC_JSON``) under ``unshare`` (see
`triforge.confine.isolation`); it imports nothing from triforge so that the kernel's module namespace
stays clean. Steps, in order: join the cgroups, bring the private loopback up, set rlimits, confine
the filesystem (private /tmp, home hidden, read-only but for the writable paths; its own mount
namespace), drop every capability, install the seccomp filter, then (inside a PID namespace) fork:
the parent stays as PID 1 and only reaps orphans, the child runs ipykernel (`kernel_argv`) or execs
`exec_argv`.
"""

import errno
import json
import os
import stat
import sys

# The script's own directory (triforge/core) must not shadow modules such as `trace`.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import re  # noqa: E402
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


def _mount_api():
    ctypes, libc = _libc()
    at_fdcwd, at_recursive = -100, 0x8000
    nr_mount_setattr = 442  # the same number on x86_64 and arm64

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
        if libc.mount(source.encode(), target.encode(), fstype and fstype.encode(), flags, data and data.encode()):
            raise OSError(ctypes.get_errno(), f"mount {fstype or 'bind'} on {target}")

    def setattr_(path: str, set_: int, clr: int, recursive: bool) -> None:
        attr = MountAttr(set_, clr, 0, 0)
        flags = at_recursive if recursive else 0
        if libc.syscall(nr_mount_setattr, at_fdcwd, path.encode(), flags, ctypes.byref(attr), ctypes.sizeof(attr)):
            raise OSError(ctypes.get_errno(), f"mount_setattr {path}")

    return mount, setattr_


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _minimal_dev(nodes: list[str]) -> None:
    """A fresh /dev holding only `nodes`, bound from the host's (opened before /dev is covered), the usual
    links, and an empty `shm` for the private one mounted next; read-only like the rest once confined."""
    mount, _ = _mount_api()
    ms_nosuid, ms_noexec, ms_bind, ms_rec = 2, 8, 4096, 16384
    ptys = {"/dev/ptmx", "/dev/pts"}
    fds = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in nodes if os.path.lexists(p) and p not in ptys}
    mount("tmpfs", "/dev", "tmpfs", ms_nosuid | ms_noexec, "mode=755")
    if ptys & set(nodes):  # pseudo-terminals of its own: a new devpts instance, /dev/ptmx its multiplexer
        os.mkdir("/dev/pts")
        mount("devpts", "/dev/pts", "devpts", ms_nosuid | ms_noexec, "newinstance,ptmxmode=0666,mode=0620")
        os.symlink("pts/ptmx", "/dev/ptmx")
    for path, fd in fds.items():
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.mkdir(path)
        else:
            open(path, "a").close()
        mount(f"/proc/self/fd/{fd}", path, None, ms_bind | ms_rec, None)
        os.close(fd)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/shm")


def _confine_filesystem(fs: dict) -> None:
    """Private tmpfs over `cover` (the host's /tmp, the user's home...), the `keep_ro` and `keep_rw` paths
    bound back in at their own place, then every mount read-only except the writable ones.

    Kept paths are opened before anything is covered, so that a path under a covered directory (a
    workdir in the host's /tmp, a virtual environment in the home) is bound back from its open fd.
    """
    mount, setattr_ = _mount_api()
    ms_nosuid, ms_nodev, ms_bind, ms_rec = 2, 4, 4096, 16384
    attr_rdonly = 0x1
    if fs.get("dev") is not None:
        _minimal_dev(fs["dev"])
    cover = {p: mode for p, mode in fs.get("cover", {}).items() if os.path.isdir(p)}
    keep = [(p, False) for p in fs.get("keep_ro", [])] + [(p, True) for p in fs.get("keep_rw", [])]
    for path, rw in keep:
        if rw and not os.path.exists(path):  # a writable place that is not there: nothing to bind
            raise FileNotFoundError(2, "writable path missing", path)
    keep = [(p, rw) for p, rw in keep if os.path.exists(p)]
    fds = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p, _ in keep}
    size = int(fs.get("tmp_size_mb") or 0)
    for path in cover:  # a writable one is bounded: its pages are memory no rlimit counts
        data = (f"mode=1777,size={size}m" if size else "mode=1777") if cover[path] == "rw" else "mode=755"
        mount("tmpfs", path, "tmpfs", ms_nosuid | ms_nodev, data)
    bound = []
    for path, rw in sorted(keep, key=lambda k: k[0].count("/")):  # parents first: children land on them
        if not any(_under(path, c) for c in cover) and not rw:
            continue  # still visible where it is; read-only like the rest
        if not os.path.exists(path):
            if os.path.isdir(f"/proc/self/fd/{fds[path]}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "a").close()
        mount(f"/proc/self/fd/{fds[path]}", path, None, ms_bind | ms_rec, None)
        bound.append((path, rw))
    for fd in fds.values():
        os.close(fd)
    for path in fs.get("mask_sockets", []):  # a host daemon's socket outside the covered places: /dev/null on it
        if os.path.lexists(path) and stat.S_ISSOCK(os.lstat(path).st_mode):
            mount("/dev/null", path, None, ms_bind, None)
    setattr_("/", attr_rdonly, 0, True)
    # only these exact mounts become writable again: what is bound below them stays read-only
    for path in [c for c, mode in cover.items() if mode == "rw"] + [p for p, rw in bound if rw]:
        setattr_(path, 0, attr_rdonly, False)


def _proc_submounts() -> list[str]:
    """Mount points inside the host's /proc, as this mount namespace's copy of the host's table lists them."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            if point.startswith("/proc/"):
                points.append(point)
    return points


def _mount_proc() -> None:
    """A /proc of the new PID namespace, with what the host had mounted inside its /proc bound back on top.

    Those are a container's masks (over /proc/kcore and the like) and the NVIDIA container toolkit's
    view of /proc/driver/nvidia, which lists only the container's GPUs and tells the driver not to
    create device files: on a fresh /proc without it CUDA does not start (error 304, "OS call failed").
    `unshare --mount-proc` would lose them; the kept paths are opened before the new /proc covers them.
    """
    mount, _ = _mount_api()
    ms_nosuid, ms_nodev, ms_noexec, ms_bind, ms_rec = 2, 4, 8, 4096, 16384
    tops: list[str] = []
    for point in sorted(_proc_submounts(), key=lambda p: p.count("/")):  # parents first; MS_REC brings children
        if not any(_under(point, t) for t in tops):
            tops.append(point)
    fds = {}
    for point in tops:
        try:
            fds[point] = os.open(point, os.O_PATH | os.O_CLOEXEC)
        except OSError:  # a host process's /proc/<pid>/... that is gone: nothing to keep
            continue
    mount("proc", "/proc", "proc", ms_nosuid | ms_nodev | ms_noexec, None)
    for point, fd in fds.items():
        if os.path.lexists(point):  # the host's per-process paths do not exist in the new namespace
            mount(f"/proc/self/fd/{fd}", point, None, ms_bind | ms_rec, None)
        os.close(fd)


def _bound_sysv_shm(mb: int) -> None:
    """At most `mb` MiB of SysV shared memory in this IPC namespace (its own sysctls; the host's untouched): a
    detached segment's pages are in no process's memory, and RLIMIT_AS does not count them."""
    page = os.sysconf("SC_PAGE_SIZE")
    for name, value in (("shmmax", mb << 20), ("shmall", (mb << 20) // page)):
        try:
            with open(f"/proc/sys/kernel/{name}", "w") as f:
                f.write(str(value))
        except OSError as exc:
            # an older kernel may not let a user namespace's root set its IPC namespace's sysctls: the sandbox
            # still runs there (these pages then go unbounded, as before 2026-12-07; docs/sandbox.md)
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                return
            raise


def _mount_mqueue(path: str) -> None:
    """This IPC namespace's POSIX message queues as files at `path` (in a private tmpfs), where the fork
    server lists and removes them between programs."""
    mount, _ = _mount_api()
    os.makedirs(path, mode=0o700, exist_ok=True)
    mount("mqueue", path, "mqueue", 2 | 4 | 8, None)  # nosuid, nodev, noexec


# the kernel's knobs under /proc: uid 0 may write most of them with no capability at all (sysctls,
# sysrq, IRQ affinity), so they stay read-only where the rest of the sandbox's own /proc is writable
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/driver",
                  "/proc/acpi", "/proc/scsi", "/proc/tty", "/proc/asound", "/proc/pressure", "/proc/sysvipc")


def _proc_writable() -> None:
    """The new /proc writable again, but for PROC_READ_ONLY: CUDA does not start on a read-only /proc (cuInit
    fails with 304, likely writing its thread names to /proc/self/task/<tid>/comm; docs/sandbox.md)."""
    mount, setattr_ = _mount_api()
    ms_bind, ms_rec, attr_rdonly = 4096, 16384, 0x1
    setattr_("/proc", 0, attr_rdonly, False)  # this mount only: what is mounted inside stays read-only
    for path in PROC_READ_ONLY:
        if os.path.lexists(path):
            mount(path, path, None, ms_bind | ms_rec, None)
            setattr_(path, attr_rdonly, 0, True)


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


def _install_seccomp(program: bytes) -> None:
    """Install the BPF program built by `triforge.confine.seccomp` (needs no_new_privs, set just before)."""
    ctypes, libc = _libc()
    pr_set_seccomp, seccomp_mode_filter = 22, 2

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(program, len(program))
    prog = SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))  # 8 bytes per instruction
    ulong = ctypes.c_ulong
    if libc.prctl(pr_set_seccomp, ulong(seccomp_mode_filter), ctypes.byref(prog), ulong(0), ulong(0)):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


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


def _exec(argv: list[str]) -> None:
    # an ignored signal stays ignored across exec: the program gets default dispositions whatever
    # the caller's (a background job ignores SIGINT; Python ignores SIGPIPE)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"sandbox launcher: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
        os._exit(127)


def _step(strict: bool, what: str, fn, *args) -> None:
    """Run one confinement step; under a strict policy a failure ends the launch (exit 125)."""
    try:
        fn(*args)
    except OSError as exc:
        print(f"sandbox launcher: {what}: {exc}", file=sys.stderr)
        if strict:
            sys.stderr.flush()
            os._exit(125)


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    strict = bool(spec.get("strict"))
    _join_cgroups(spec.get("cgroups", []))
    private_mounts = bool(spec.get("host_mount_namespace")) and (
        os.readlink("/proc/self/ns/mnt") != spec.get("host_mount_namespace"))
    if spec.get("mount_proc"):
        if not private_mounts:
            print("sandbox launcher: /proc not mounted: not in a private mount namespace", file=sys.stderr)
            sys.stderr.flush()
            os._exit(125)
        _step(strict, "/proc of the PID namespace not mounted", _mount_proc)
        if spec.get("sysv_shm_mb"):
            # no more than a private /tmp holds, nor than the memory limit (which cannot see these pages)
            memory = [v[0] >> 20 for k, v in spec.get("rlimits", {}).items() if k in ("RLIMIT_AS", "RLIMIT_DATA")
                      and v[0] > 0]
            _step(strict, "SysV shared memory not bounded", _bound_sysv_shm,
                  min([int(spec["sysv_shm_mb"]), *memory]))
    if spec.get("loopback_up"):
        _step(False, "could not bring loopback up", _loopback_up)  # no loopback: still no network
    _set_rlimits(spec.get("rlimits", {}))
    if spec.get("filesystem") is not None:
        # Mounting over /tmp and the home is only ever done in a mount namespace of our own: started
        # any other way (without unshare, by hand), the launcher must not touch the host's mounts.
        if not private_mounts:
            print("sandbox launcher: filesystem not confined: not in a private mount namespace", file=sys.stderr)
            sys.stderr.flush()
            os._exit(125)
        _step(strict, "filesystem not confined", _confine_filesystem, spec["filesystem"])
        if spec.get("mount_proc"):
            _step(strict, "/proc not confined", _proc_writable)
        if spec.get("mqueue_mount"):
            _step(False, "message queues not mounted", _mount_mqueue, spec["mqueue_mount"])  # to the server's log
    if spec.get("drop_capabilities"):
        _step(strict, "capabilities not dropped", _drop_capabilities)
    if spec.get("seccomp_bpf"):  # a second layer: its absence is reported by the host, not fatal
        _step(False, "seccomp filter not installed", _install_seccomp, bytes.fromhex(spec["seccomp_bpf"]))
    os.chdir(spec["cwd"])
    lifeline = spec.get("lifeline")
    if spec.get("reaper"):
        child = os.fork()
        if child:
            _reap_until(child, lifeline)
    if lifeline is not None:
        os.close(lifeline)
    if spec.get("exec_argv"):
        _exec(spec["exec_argv"])
    _run_kernel(spec["kernel_argv"])


if __name__ == "__main__":
    main()
