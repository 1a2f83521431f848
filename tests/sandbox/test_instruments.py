"""The instruments the sandbox tests use (sandbox_support) see what those tests say is absent."""

from __future__ import annotations

import time

import psutil

from sandbox_support import FORK_SERVER, Sampler, live_descendants, processes_with, wait_until


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


def test_instruments_leave_out_a_fork_server_and_what_it_runs():
    """A process below a shared fork server may be another test worker's program: not a leftover of ours."""
    import subprocess

    server = subprocess.Popen(["sh", "-c", "sleep 1234.25 & wait", FORK_SERVER])
    plain = subprocess.Popen(["sleep", "1234.5"])
    try:
        assert wait_until(lambda: len(processes_with("1234.25")) == 2)  # the server and its program
        seen = live_descendants()
        assert plain.pid in seen and not seen & set(processes_with("1234.25"))
    finally:
        for p in (server, plain):
            p.kill()
            p.wait()
        for pid in processes_with("sleep 1234.25"):
            psutil.Process(pid).kill()
