"""The seccomp filter under the namespaces: syscalls untrusted code never needs fail with EPERM.

A second layer: the namespaces and the dropped capabilities already refuse most of these, and the
filter refuses them again, whatever the machine's sysctls allow (nested user namespaces, ptrace of a
sibling, keyrings, io_uring, netlink sockets to the kernel). The filter is built here with
libseccomp (through `pyseccomp`, a ctypes wrapper) and exported as a BPF program; the launcher
installs that program with one `prctl` after it dropped its capabilities, so the launcher itself
needs neither libseccomp nor pyseccomp. Nothing an honest Python or CUDA program uses is denied
(ioctl, mmap, threads, subprocesses, AF_UNIX / AF_INET / AF_INET6 sockets stay open).
"""

from __future__ import annotations

import errno
import functools
import tempfile
from dataclasses import dataclass

# syscall families refused outright, with EPERM
DENIED: dict[str, tuple[str, ...]] = {
    "ptrace and other processes' memory": ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
                                "process_madvise"),
    "mounts": ("mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
               "open_tree", "mount_setattr"),
    "new namespaces": ("unshare", "setns"),
    "kernel keyrings": ("keyctl", "add_key", "request_key"),
    "eBPF and perf": ("bpf", "perf_event_open"),
    "kernel modules and kexec": ("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"),
    "file handles": ("open_by_handle_at", "name_to_handle_at"),
    "userfaultfd and io_uring": ("userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register"),
}
# socket() families allowed; AF_NETLINK only with NETLINK_ROUTE (glibc's getifaddrs, if_nameindex)
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, NETLINK_ROUTE = 1, 2, 10, 16, 0
# clone() flags that make a namespace: refused like unshare
CLONE_NEW = {"CLONE_NEWTIME": 0x80, "CLONE_NEWNS": 0x20000, "CLONE_NEWCGROUP": 0x02000000,
             "CLONE_NEWUTS": 0x04000000, "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000,
             "CLONE_NEWPID": 0x20000000, "CLONE_NEWNET": 0x40000000}


@dataclass(frozen=True)
class SeccompFilter:
    """The exported filter (`bpf`: raw `sock_filter` instructions), or why there is none."""

    bpf: bytes | None
    why_not: str = ""

    @property
    def available(self) -> bool:
        return self.bpf is not None

    def describe(self) -> str:
        if self.bpf is None:
            return f"no seccomp filter ({self.why_not})"
        return ("seccomp filter: refuses " + ", ".join(DENIED) + " (new namespaces through clone's flags and clone3 "
                "too), sockets other than unix, inet, inet6 and netlink-route")


@functools.cache
def seccomp_filter() -> SeccompFilter:
    """The filter for this machine, built once per process; `bpf` None when libseccomp is missing."""
    try:
        import pyseccomp as sc
    except ImportError:
        return SeccompFilter(None, "pyseccomp is not installed")
    except (OSError, RuntimeError) as exc:  # pyseccomp finds and loads libseccomp.so at import
        return SeccompFilter(None, f"libseccomp is missing: {exc}")
    try:
        return SeccompFilter(_export(sc))
    except (OSError, ValueError) as exc:
        return SeccompFilter(None, f"libseccomp could not build the filter: {exc}")


def _export(sc) -> bytes:  # noqa: ANN001 - the pyseccomp module
    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)  # a 32-bit or x32 syscall from this 64-bit process
    deny = sc.ERRNO(errno.EPERM)
    for names in DENIED.values():
        for name in names:
            if sc.resolve_syscall(sc.Arch.NATIVE, name) >= 0:  # an older libseccomp may not know it
                f.add_rule(deny, name)
    # clone3 passes its flags in memory, out of a filter's reach: ENOSYS makes glibc fall back to clone
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in CLONE_NEW.values():  # x86_64 and arm64 both take clone's flags as the first argument
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    allowed = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK}
    for family in range(max(allowed) + 1):
        if family not in allowed:
            f.add_rule(deny, "socket", sc.Arg(0, sc.EQ, family))
    f.add_rule(deny, "socket", sc.Arg(0, sc.GT, max(allowed)))  # also any value with high bits set
    f.add_rule(deny, "socket", sc.Arg(0, sc.EQ, AF_NETLINK), sc.Arg(2, sc.NE, NETLINK_ROUTE))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()
