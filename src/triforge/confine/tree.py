"""The processes of one sandbox, read from /proc: its descendants, their task count, whether one runs."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator

import psutil


def task_count(pids: set[int]) -> int:
    """Tasks (threads count) of every process in `pids`: what RLIMIT_NPROC counts."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            total += int(stat[stat.rindex(b")") + 2 :].split()[17])  # num_threads
        except (OSError, ValueError, IndexError):
            pass
    return total


def memory_mb(pids: set[int]) -> float:
    """Memory of the processes in `pids` together, in MiB: the sum of their proportional set sizes (pages shared
    between them, as after a fork, counted once), or of their resident sizes where /proc does not give PSS."""
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    total_kb = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
                total_kb += next(int(line.split()[1]) for line in f if line.startswith(b"Pss:"))
            continue
        except (OSError, StopIteration, ValueError, IndexError):
            pass
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total_kb += int(f.read().split()[1]) * page_kb
        except (OSError, ValueError, IndexError):
            pass
    return total_kb / 1024


MemfdMaps = tuple[dict[int, int], int]  # largest mapping of each memfd (by inode), PSS of memfd mappings (KiB)


def open_files(pids: Iterable[int], wanted: Callable[[str], bool]) -> Iterator[os.stat_result]:
    """The files `pids` hold open whose /proc link target (a path, `... (deleted)`, `/memfd:...`) is `wanted`."""
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if wanted(os.readlink(f"{fd_dir}/{fd}")):
                    yield os.stat(f"{fd_dir}/{fd}")
            except OSError:
                continue


def memfd_open(pids: Iterable[int]) -> dict[int, int]:
    """Anonymous memory files (memfd_create) open in `pids`: allocated bytes by inode."""
    return {st.st_ino: st.st_blocks * 512 for st in open_files(pids, lambda t: t.startswith("/memfd:"))}


def memfd_maps(pids: Iterable[int]) -> MemfdMaps:
    """The memfd mappings of `pids`: the largest mapping of each file, and their PSS (already in `memory_mb`).
    Reads /proc/PID/smaps only for a process whose maps name a memfd."""
    spans: dict[int, int] = {}
    pss_kb = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                if b" /memfd:" not in f.read():
                    continue
            with open(f"/proc/{pid}/smaps", "rb") as f:
                smaps = f.read().decode(errors="replace").splitlines()
        except OSError:
            continue
        memfd = False
        for line in smaps:
            head = line.split(maxsplit=5)
            if len(head) >= 5 and "-" in head[0] and ":" in head[3]:  # a mapping's first line
                memfd = len(head) == 6 and head[5].startswith("/memfd:")
                if memfd:
                    start, end = (int(x, 16) for x in head[0].split("-"))
                    spans[int(head[4])] = max(spans.get(int(head[4]), 0), end - start)
            elif memfd and line.startswith("Pss:"):
                pss_kb += int(line.split()[1])
    return spans, pss_kb


def memfd_mb(opened: dict[int, int], maps: MemfdMaps) -> float:
    """Memory (MiB) in memfds beyond what the processes' PSS counts: their pages belong to no process until
    mapped and touched, and RLIMIT_AS does not count them. A file held open counts its allocated blocks, one
    held only by a mapping its largest mapping; the PSS of memfd mappings is taken off (counted once)."""
    spans, pss_kb = maps
    total = sum(opened.values()) + sum(span for ino, span in spans.items() if ino not in opened)
    return max(0.0, total / (1 << 20) - pss_kb / 1024)


MAX_FOLDER_ENTRIES = 100_000


def outermost(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Each real path once, none inside another (a folder measured twice would count twice)."""
    real = sorted({os.path.realpath(p) for p in paths})
    return [p for p in real if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in real)]


def folder_mb(path: str | os.PathLike[str], max_entries: int = MAX_FOLDER_ENTRIES) -> float:
    """Disk space the files below `path` take (allocated blocks, MiB; links not followed); infinite when it holds
    more than `max_entries` entries (a folder no honest run writes, and too many to count every 0.1 s)."""
    total, seen = 0, 0
    todo = [os.fspath(path)]
    while todo:
        try:
            entries = os.scandir(todo.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > max_entries:
                    return float("inf")
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
    return total / (1 << 20)


def held_deleted(pids: Iterable[int], roots: Iterable[str], *, opened: bool = True,
                 mapped: bool = True) -> dict[tuple[int, int, int], int]:
    """Files under `roots` that are deleted but still held by a process in `pids`, open (`opened`) or mapped
    (`mapped`): disk the folder no longer shows. Keyed by (device major, minor, inode), so a file counts once;
    bytes are an open file's allocated blocks, else (held only by a mapping, whose blocks cannot be read
    without an fd) the largest mapping of that file."""
    prefixes = [r.rstrip("/") + "/" for r in roots]

    def under(path: str) -> bool:
        return any(path.startswith(p) for p in prefixes)

    pids = list(pids)
    spans: dict[tuple[int, int, int], int] = {}
    for pid in pids if mapped else ():
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        if b" (deleted)" not in raw:  # the usual case: no line to parse (a kernel's maps run to 1,000 lines)
            continue
        for line in raw.decode(errors="replace").splitlines():
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or not parts[5].endswith(" (deleted)") or not under(parts[5][: -len(" (deleted)")]):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            major, minor = (int(x, 16) for x in parts[3].split(":"))
            key = (major, minor, int(parts[4]))
            spans[key] = max(spans.get(key, 0), end - start)
    blocks = {} if not opened else {
        (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino): st.st_blocks * 512
        for st in open_files(pids, lambda t: t.endswith(" (deleted)") and under(t[: -len(" (deleted)")]))}
    return {**spans, **blocks}


def descendants(root: int) -> set[int]:
    """Every descendant of `root`, from /proc/PID/task/TID/children: no scan of the whole process table,
    which matters after every cell of an unprivileged kernel (no pids cgroup to list them)."""
    found: set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid not in found:
                    found.add(kid)
                    todo.append(kid)
    return found


def wait_gone(pids: set[int], timeout: float) -> None:
    """Wait until none of `pids` runs (zombies count as gone: their parent reaps them)."""
    end = time.monotonic() + timeout
    left = set(pids)
    while left and time.monotonic() < end:
        for pid in list(left):
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    left.discard(pid)
            except psutil.Error:
                left.discard(pid)
        if left:
            time.sleep(0.005)


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not): one read of its stat line, which `alive` does on every poll."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] not in (b"Z", b"X")
