"""Instruments the sandbox tests use to inspect the process tree (tests/sandbox/test_instruments.py checks them)."""

from __future__ import annotations

import threading
import time

import psutil

FORK_SERVER = "forkserver_main.py"


def live_descendants() -> set[int]:
    """Live (non-zombie) processes below this test process, leaving out the confined fork servers and what
    they forked: a server is a per-user service shared by every process of this user (the other test
    workers included), so a program it runs for another worker may appear below whichever worker started it."""
    out: set[int] = set()
    shared: set[int] = set()
    for p in psutil.Process().children(recursive=True):  # parents come before their children
        try:
            if p.ppid() in shared or FORK_SERVER in " ".join(p.cmdline()):
                shared.add(p.pid)
            elif p.status() != psutil.STATUS_ZOMBIE:
                out.add(p.pid)
        except psutil.Error:
            pass
    return out


def processes_with(marker: str) -> list[int]:
    """Every live process on the machine whose command line contains `marker`."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(p.info["cmdline"] or ()):
                found.append(p.pid)
        except psutil.Error:
            pass
    return found


def wait_until(cond, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


class Sampler:
    """Samples, in a thread, the number and total RSS of processes below the test process.

    `ignore`: processes (with everything below them) that were there before and belong to other tests of
    the same session (a warm CP-Bench server, a pooled kernel); counting them made a bounded bomb look
    unbounded when the whole suite ran."""

    def __init__(self, period: float = 0.02, ignore: set[int] | frozenset[int] = frozenset()) -> None:
        self.period = period
        self.ignore = set(ignore)
        self.max_count = 0
        self.max_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            count = rss = 0
            ignored = set(self.ignore)
            for p in psutil.Process().children(recursive=True):
                try:
                    if p.pid in ignored or p.ppid() in ignored:  # children() lists parents first
                        ignored.add(p.pid)
                        continue
                    rss += p.memory_info().rss
                    count += 1
                except psutil.Error:
                    pass
            self.max_count = max(self.max_count, count)
            self.max_rss = max(self.max_rss, rss)
            time.sleep(self.period)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
