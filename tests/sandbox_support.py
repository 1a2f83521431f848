"""Instruments the sandbox tests use to inspect the process tree, and a test that they work."""

from __future__ import annotations

import threading
import time

import psutil


def live_descendants() -> set[int]:
    """Live (non-zombie) processes below this test process."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
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


# The instruments themselves must be able to see what the sandbox tests say is absent.


def test_instruments_see_a_leftover_process():
    import subprocess

    marker = "1234.5678"
    p = subprocess.Popen(["sleep", marker])
    try:
        assert p.pid in live_descendants()
        assert processes_with(marker) == [p.pid]
        with Sampler() as s:
            time.sleep(0.1)
        assert s.max_count >= 1 and s.max_rss > 0
    finally:
        p.kill()
        p.wait()
    assert processes_with(marker) == []
    assert p.pid not in live_descendants()
