"""triforge.confine.proc.run: deadlines, whole-tree kills, output caps, rlimits."""

from __future__ import annotations

import os
import sys
import time

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from triforge.confine.proc import ProcLimits, run
from triforge.core.tools import cap_text

PY = sys.executable


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_dead(pid: int, timeout: float = 3.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


def test_success_captures_output_and_exit_code(tmp_path):
    r = run([PY, "-c", "import sys, os; print(os.getcwd()); print('e', file=sys.stderr); sys.exit(3)"], cwd=tmp_path)
    assert r.returncode == 3 and not r.ok and not r.timed_out
    assert r.stdout.strip() == str(tmp_path)
    assert r.stderr.strip() == "e"
    assert r.duration_s > 0


def test_input_and_env_are_passed():
    r = run([PY, "-c", "import os; print(input() + os.environ['X_T'])"], input="ab\n", env={**os.environ, "X_T": "cd"})
    assert r.ok and r.stdout.strip() == "abcd"


def test_missing_program_raises():
    with pytest.raises(FileNotFoundError):
        run(["/nonexistent/program"])
    with pytest.raises(FileNotFoundError):
        run(["/nonexistent/program"], limits=ProcLimits(memory_mb=100))


def test_timeout_kills_whole_group_quickly(tmp_path):
    pidfile = tmp_path / "child.pid"
    code = f"import subprocess, time; p = subprocess.Popen(['sleep', '300']); open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(300)"
    t0 = time.monotonic()
    r = run([PY, "-c", code], timeout=1.0)
    assert r.timed_out and r.returncode is None and not r.ok
    assert time.monotonic() - t0 < 4
    assert _wait_dead(int(pidfile.read_text()))


def test_escaped_setsid_grandchild_is_killed(tmp_path):
    pidfile = tmp_path / "escaped.pid"
    # The grandchild leaves the process group and the tree (its parent exits at once).
    script = (
        f"setsid sh -c 'echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 300' > /dev/null 2>&1 < /dev/null &"
        f" while [ ! -s {pidfile} ]; do sleep 0.02; done; echo started"
    )
    r = run(["sh", "-c", script], timeout=10)
    assert r.ok and r.stdout.strip() == "started"
    pid = int(pidfile.read_text())
    assert _wait_dead(pid), "a setsid grandchild survived run()"


def test_escaped_grandchild_killed_on_timeout(tmp_path):
    pidfile = tmp_path / "escaped.pid"
    script = (
        f"setsid sh -c 'echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 300' > /dev/null 2>&1 < /dev/null &"
        f" while [ ! -s {pidfile} ]; do sleep 0.02; done; sleep 300"
    )
    r = run(["sh", "-c", script], timeout=3.0)
    assert r.timed_out
    assert _wait_dead(int(pidfile.read_text()))


def test_background_child_left_on_success_is_killed(tmp_path):
    pidfile = tmp_path / "bg.pid"
    r = run(["sh", "-c", f"sleep 300 & echo $! > {pidfile}"], timeout=10)
    assert r.ok
    assert _wait_dead(int(pidfile.read_text()))


def test_huge_output_is_capped_head_and_tail():
    code = "import sys; sys.stdout.write('H' * 1000 + 'x' * 10_000_000 + 'T' * 1000)"
    r = run([PY, "-c", code], output_limit=10_000, timeout=30)
    assert r.ok and r.stdout_truncated and not r.stderr_truncated
    assert len(r.stdout) < 10_200
    assert r.stdout.startswith("H" * 1000) and r.stdout.endswith("T" * 1000)
    assert "bytes cut" in r.stdout


def test_memory_limit_applies_before_start():
    r = run([PY, "-c", "x = bytearray(2 * 1024**3); print('allocated')"], limits=ProcLimits(memory_mb=512))
    assert r.returncode != 0 and "allocated" not in r.stdout
    assert "MemoryError" in r.stderr


def test_cpu_and_file_limits(tmp_path):
    r = run([PY, "-c", "while True: pass"], limits=ProcLimits(cpu_seconds=1), timeout=20)
    assert not r.timed_out and r.returncode is not None and r.returncode < 0  # killed by SIGXCPU/SIGKILL
    code = "open('big', 'wb').write(b'x' * (3 << 20))"
    r = run([PY, "-c", code], limits=ProcLimits(max_file_mb=1), cwd=tmp_path, timeout=20)
    assert r.returncode != 0 and "File too large" in r.stderr


@given(st.text(max_size=300), st.integers(min_value=1, max_value=120))
def test_cap_text_keeps_head_and_tail_within_limit(text, limit):
    out, cut = cap_text(text, limit)
    if len(text) <= limit:
        assert (out, cut) == (text, False)
    else:
        assert cut
        head, _, tail = out.partition("\n[... ")
        assert text.startswith(head) and len(head) == limit * 2 // 3
        assert text.endswith(tail.split(" characters cut ...]\n", 1)[1])
