"""Hostile cells: every one must come back as a structured result within deadline + 5 s, leave the
sandbox usable, leave no process behind, and keep host memory within the limit."""

from __future__ import annotations

import os
import shutil
import socket
import time
import uuid
from pathlib import Path

import psutil
import pytest

from sandbox_support import Sampler, live_descendants, processes_with, wait_until
from triforge.sandbox.kernel_sandbox import ExecResult, KernelSandbox

DEADLINE = 2.0
MEMORY_MB = 1024
MAX_PROCESSES = 128


@pytest.fixture(scope="module")
def sb():
    before = live_descendants()
    with KernelSandbox(memory_mb=MEMORY_MB, max_processes=MAX_PROCESSES, output_limit=10_000) as box:
        box.unrelated_pids = before  # what the memory samplers must not count
        yield box
    assert wait_until(lambda: live_descendants() <= before), "processes left after close()"


@pytest.fixture
def hostile(sb):
    """Runs one hostile cell and checks what every hostile cell must satisfy."""
    sb.execute("keep = 42")
    baseline = len(live_descendants())

    def run(code: str, *, state_lost: bool | None, timeout: float = DEADLINE) -> ExecResult:
        t0 = time.monotonic()
        r = sb.execute(code, timeout=timeout)
        assert time.monotonic() - t0 < timeout + 5, f"took {time.monotonic() - t0:.1f} s"
        assert isinstance(r, ExecResult) and not r.ok
        if state_lost is not None:
            assert r.restarted is state_lost and r.state_lost is state_lost
        after = sb.execute("1 + 1", timeout=10)
        assert after.ok and after.result == "2", "sandbox unusable after the hostile cell"
        kept = sb.execute("keep", timeout=10)
        assert kept.ok == (not r.restarted), "state loss not reported truthfully"
        # zero processes left behind: only the kernel's own processes remain below us
        assert wait_until(lambda: len(live_descendants()) == baseline), sorted(live_descendants())
        return r

    return run


def test_pure_python_infinite_loop_is_interrupted(hostile):
    r = hostile("while True:\n    pass", state_lost=False)
    assert r.timed_out and r.error is not None and r.error.name == "KeyboardInterrupt"


def test_native_call_with_sigint_blocked_forces_restart(hostile):
    code = "import ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\nctypes.CDLL(None).sleep(600)"
    r = hostile(code, state_lost=True)
    assert r.timed_out and "restarted" in (r.notice or "")


def test_sigint_ignored_busy_loop_forces_restart(hostile):
    r = hostile("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", state_lost=True)
    assert r.timed_out


def test_memory_bomb_in_kernel_is_bounded(hostile, sb):
    with Sampler(ignore=sb.unrelated_pids) as s:
        r = hostile("hog = []\nwhile True:\n    hog.append(b'x' * 10**7)", state_lost=None, timeout=20)
    assert r.error is not None and (r.error.name == "MemoryError" or r.restarted)
    assert s.max_rss < (MEMORY_MB + 200) << 20  # the kernel plus the test's own helpers' slack


def test_memory_bomb_across_child_processes_is_bounded(hostile, sb):
    if "memory cgroup" not in sb.isolation.memory_limit:
        pytest.skip(f"no memory cgroup here ({sb.isolation.memory_limit}); RLIMIT_AS is per process")
    code = (
        "import subprocess, sys\n"
        "ps = [subprocess.Popen([sys.executable, '-c', \"import time; b = b'x' * (300 << 20); time.sleep(2)\"]) for _ in range(6)]\n"
        "codes = [p.wait() for p in ps]\n"
        "print(codes)\n"
        "assert all(c == 0 for c in codes)"
    )
    with Sampler(ignore=sb.unrelated_pids) as s:
        r = hostile(code, state_lost=None, timeout=20)
    assert s.max_rss < (MEMORY_MB + 200) << 20, f"{s.max_rss >> 20} MiB used under a {MEMORY_MB} MiB limit"
    assert r.restarted or "-9" in r.stdout


def test_memory_spread_over_child_processes_is_bounded_without_a_memory_cgroup(hostile, sb):
    """Not root: RLIMIT_AS holds each process alone, so the sandbox measures the kernel's whole tree."""
    if "memory cgroup" in sb.isolation.memory_limit:
        pytest.skip("a memory cgroup bounds the tree here (the test above)")
    assert "children together" in sb.isolation.memory_limit, sb.isolation.memory_limit
    child = ("import time\nhog = []\nfor _ in range(40):\n    hog.append(b'x' * (10 << 20))\n    time.sleep(0.02)\n"
             "time.sleep(10)")
    code = ("import subprocess, sys\n"
            f"ps = [subprocess.Popen([sys.executable, '-c', {child!r}]) for _ in range(6)]\n"
            "print([p.wait() for p in ps])")
    with Sampler(ignore=sb.unrelated_pids) as s:
        r = hostile(code, state_lost=True, timeout=20)  # 2.4 GB if nothing stopped it
    assert "memory limit" in (r.notice or "") and not r.timed_out, r.notice
    assert s.max_rss < (MEMORY_MB + 600) << 20, f"{s.max_rss >> 20} MiB used under a {MEMORY_MB} MiB limit"


def test_a_cell_filling_its_working_folder_is_stopped(tmp_path):
    """The disk under the working folder: files under RLIMIT_FSIZE each, but without end together."""
    with KernelSandbox(tmp_path, folder_mb=100, output_limit=10_000) as box:
        box.execute("keep = 1")
        r = box.execute("import itertools\nfor i in itertools.count():\n"
                        "    open(f'f{i}', 'wb').write(b'x' * (10 << 20))", timeout=30)
        assert r.restarted and "grew by more than 100 MiB" in (r.notice or ""), r.notice
        # stopped by the folder watch, long before the 30 s deadline; the watch acts within 0.1 s of a
        # measurement, and on a loaded 2-core machine this writer has put 400 MB past the limit in that time
        assert not r.timed_out and len(list(tmp_path.glob("f*"))) < 150
        assert box.execute("1 + 1").result == "2"
        honest = box.execute("open('small', 'wb').write(b'x' * (5 << 20))")
        assert honest.ok, honest.notice


def test_growth_adds_up_over_cells(tmp_path):
    """Under the limit in every cell, past it together: the limit is the sandbox's, not each cell's. Deleting
    files makes room again."""
    with KernelSandbox(tmp_path, folder_mb=100, output_limit=10_000) as box:
        notices = []
        for cell in range(6):
            r = box.execute(f"open('part{cell}', 'wb').write(b'x' * (30 << 20)); import time; time.sleep(0.5)")
            notices.append(r.notice or "")
        assert any("grew by more than 100 MiB" in n for n in notices), notices
        assert not any("grew by" in n for n in notices[:3]), notices  # 90 MB: within the limit
        freed = box.execute("import glob, os\nfor f in glob.glob('part*'):\n    os.unlink(f)")
        assert freed.ok, freed.notice
        # the same with files deleted but kept open across cells (the kernel's state outlives a cell)
        box.execute("import os\nheld = []")
        notices = []
        for cell in range(6):
            r = box.execute(f"f = open('h{cell}', 'wb'); os.unlink('h{cell}'); f.write(b'x' * (30 << 20)); "
                            "f.flush(); held.append(f); import time; time.sleep(0.5)")
            notices.append(r.notice or "")
            if r.restarted:
                break
        assert any("grew by more than 100 MiB" in n for n in notices), notices
        again = box.execute("open('again', 'wb').write(b'x' * (30 << 20)); import time; time.sleep(0.5)")
        assert again.ok, again.notice


def test_a_cell_filling_its_home_is_stopped_too(tmp_path):
    """HOME (and IPython's and matplotlib's folders) lie outside the working folder but are written through to
    the host: the folder limit holds every writable folder together."""
    with KernelSandbox(tmp_path, folder_mb=100, output_limit=10_000) as box:
        r = box.execute("import itertools, os\nhome = os.path.expanduser('~')\nfor i in itertools.count():\n"
                        "    open(os.path.join(home, f'f{i}'), 'wb').write(b'x' * (10 << 20))", timeout=30)
        assert r.restarted and "grew by more than 100 MiB together" in (r.notice or ""), r.notice
        assert not r.timed_out
        assert box.execute("1 + 1").result == "2"


def test_a_cell_holding_deleted_files_is_stopped(tmp_path):
    """Files deleted while open take disk that no folder shows: they count toward the limit."""
    with KernelSandbox(tmp_path, folder_mb=100, output_limit=10_000) as box:
        r = box.execute("import itertools, os\nkeep = []\nfor i in itertools.count():\n"
                        "    f = open(f'x{i}', 'wb'); os.unlink(f'x{i}'); f.write(b'x' * (10 << 20)); f.flush()\n"
                        "    keep.append(f)", timeout=30)
        assert r.restarted and "grew by more than 100 MiB" in (r.notice or ""), r.notice
        assert not r.timed_out
        assert box.execute("1 + 1").result == "2"


def test_memory_in_anonymous_files_is_bounded(hostile, sb):
    """memfd_create pages belong to no process until mapped, and RLIMIT_AS does not count them: without a
    memory cgroup the watch counts what the kernel holds in them (the kernel alone, no child needed)."""
    code = ("import os, time\nkeep = []\nfor i in range(160):\n    fd = os.memfd_create(f'm{i}')\n"
            "    os.write(fd, b'x' * (10 << 20)); keep.append(fd)\n    time.sleep(0.01)\ntime.sleep(10)")
    r = hostile(code, state_lost=True, timeout=30)  # 1.6 GB if nothing stopped it
    assert not r.timed_out, r.notice
    if "memory cgroup" not in sb.isolation.memory_limit:
        assert "memory limit" in (r.notice or ""), r.notice


def test_host_sockets_under_run_are_not_seen(sb):
    """D-Bus, systemd, docker and the user's agents keep their sockets under /run: a cell sees it empty."""
    r = sb.execute("import os\nsorted(os.listdir('/run')), os.path.exists('/var/run/dbus')")
    assert r.result == "([], False)", (r.result, r.notice)
    r = sb.execute("import os\nsorted(os.listdir('/dev'))")  # and a /dev without raw disks, loop devices, kvm
    assert set(eval(r.result)) <= {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "fd", "stdin",
                                   "stdout", "stderr", "shm"}, r.result


def test_fork_bomb_is_contained(hostile):
    # A generous deadline: on a loaded machine forking 128 processes can take seconds, and the limit is
    # reached (and named) long before the deadline; a quiet machine still ends in well under a second.
    with Sampler(period=0.005) as s:
        r = hostile("import os\nwhile True:\n    os.fork()", state_lost=True, timeout=30)
    assert "process limit" in (r.notice or ""), r.notice
    assert not r.timed_out, r.notice  # stopped by the limit, not by the deadline
    assert s.max_count <= MAX_PROCESSES + 3  # the limit counts the kernel's threads too


def test_a_fork_the_process_limit_refused_is_recognised():
    from triforge.sandbox.kernel_sandbox import ExecError, _fork_refused

    tb = 'File "<cell>", line 3\n    os.fork()\nBlockingIOError: [Errno 11] Resource temporarily unavailable'
    assert _fork_refused(ExecError("BlockingIOError", "[Errno 11] Resource temporarily unavailable", tb))
    popen = 'subprocess.py, in _execute_child\n    self.pid = _fork_exec(\nBlockingIOError: [Errno 11]'
    assert _fork_refused(ExecError("BlockingIOError", "[Errno 11] Resource temporarily unavailable", popen))
    sock = 'File "<cell>", line 4\n    s.recv(10)\nBlockingIOError: [Errno 11] Resource temporarily unavailable'
    assert not _fork_refused(ExecError("BlockingIOError", "[Errno 11] Resource temporarily unavailable", sock))
    assert not _fork_refused(ExecError("OSError", "fork failed", "os.fork()"))
    assert not _fork_refused(None)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to an unprivileged user needs root")
def test_fork_bomb_is_contained_as_an_unprivileged_user():
    """Without root there is no pids cgroup: RLIMIT_NPROC holds the bomb, and the notice must name it."""
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1]))
    import unprivileged

    try:
        done = unprivileged.run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", __file__, "-k",
                                 "test_fork_bomb_is_contained and not unprivileged"],
                                timeout=300, capture_output=True, text=True, cwd=Path(__file__).parents[2])
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        pytest.skip(str(exc))
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0 and "1 passed" in tail, tail


def test_segfault_restarts(hostile):
    r = hostile("import ctypes\nctypes.string_at(0)", state_lost=True)
    assert "SIGSEGV" in (r.notice or "") and r.error is not None


def test_os_exit_restarts(hostile):
    r = hostile("import os\nos._exit(1)", state_lost=True)
    assert "exited with code 1" in (r.notice or "")


def test_ten_megabytes_of_stdout_are_capped(hostile, sb):
    r = hostile("print('<' + 'x' * 10_000_000 + '>')\nraise SystemExit", state_lost=False)
    assert r.truncated and len(r.stdout) < 10_300
    assert r.stdout.startswith("<xxx") and r.stdout.rstrip().endswith("x>")
    assert "characters cut" in r.stdout
    [full] = [p for p in r.full_output if p.endswith("stdout.txt")]
    assert full.startswith(str(sb.workdir))
    text = open(full).read()
    assert len(text) == 10_000_003 and text.startswith("<x") and text.endswith(">\n")


def test_endless_output_flood(hostile):
    r = hostile("while True:\n    print('y' * 1000)", state_lost=None)
    assert r.timed_out and r.truncated and len(r.stdout) < 10_300


def _own_non_loopback_ipv4() -> str | None:
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


def test_network_is_cut(hostile, sb):
    addr = _own_non_loopback_ipv4()
    if addr is None:
        pytest.skip("this machine has no non-loopback IPv4 address to listen on")
    assert sb.isolation.network_isolated
    with socket.socket() as listener:
        listener.bind((addr, 0))
        listener.listen()
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        code = f"import socket\nsocket.create_connection(({addr!r}, {port}), timeout=3).close()"
        r = hostile(code, state_lost=False)
        assert r.error is not None and r.error.name in ("OSError", "ConnectionRefusedError", "TimeoutError")
        with pytest.raises(TimeoutError):
            listener.accept()
        # The same cell does reach the listener from a sandbox with network on: the test can fail.
        with KernelSandbox(network=True) as open_box:
            assert not open_box.isolation.network_isolated
            ok = open_box.execute(code, timeout=10)
            assert ok.ok, ok.error
            conn, _ = listener.accept()
            conn.close()


def test_deep_recursion(hostile):
    r = hostile("def f(n):\n    return f(n + 1)\nf(0)", state_lost=False, timeout=10)
    assert r.error is not None and r.error.name == "RecursionError"


def test_unbounded_recursion_limit(hostile):
    code = "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1)\nf(0)"
    r = hostile(code, state_lost=None)
    assert r.error is not None


def test_input_fails_at_once(hostile):
    t0 = time.monotonic()
    r = hostile("name = input('name? ')", state_lost=False)
    assert time.monotonic() - t0 < DEADLINE and not r.timed_out
    assert r.error is not None and "input" in r.error.value


def test_background_process_is_killed(hostile):
    marker = "987.654"
    r = hostile(f"import subprocess\np = subprocess.Popen(['sleep', '{marker}'])\nraise SystemExit", state_lost=False)
    assert r.killed_processes >= 1
    assert processes_with(marker) == []


def test_escaped_daemon_is_killed(hostile):
    marker = "876.543"
    code = f"import subprocess\nsubprocess.run('setsid sleep {marker} > /dev/null 2>&1 &', shell=True)\nraise SystemExit"
    r = hostile(code, state_lost=False)
    assert r.killed_processes >= 1
    assert processes_with(marker) == []


def test_cpu_limit_per_cell():
    with KernelSandbox(cpu_seconds=1) as box:
        burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.7:\n    pass"
        for _ in range(3):  # 2.1 s of CPU in all, under a 1 s budget that renews with every cell
            assert box.execute(burn, timeout=30).ok
        r = box.execute("while True:\n    pass", timeout=30)
        assert r.restarted and not r.timed_out and r.duration_s < 25
        assert "CPU-time limit" in r.notice
        assert box.execute("1 + 1").result == "2"
        if "children" in box.isolation.cpu_limit:  # a child's CPU counts against the cell too
            r = box.execute("import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'while True: pass'])", timeout=30)
            assert r.restarted and "CPU-time limit" in r.notice and r.duration_s < 25
        assert box.execute("1 + 1").result == "2"


def test_host_filesystem_is_read_only_outside_workdir(hostile, sb):
    if sb.isolation.writable_mounts is None:
        pytest.skip(f"no private mount namespace here: {sb.isolation.summary()}")
    # a host directory outside /tmp: beside this test file (read-only in the sandbox) or in the home (hidden)
    base = Path(__file__).parent if os.access(Path(__file__).parent, os.W_OK) else Path.home()
    target = base / f".triforge-sandbox-test-{uuid.uuid4().hex[:8]}"
    target.mkdir(parents=True)
    try:
        (target / "control.txt").write_text("the test itself can write here")
        code = f"open({str(target / 'planted.txt')!r}, 'w').write('x')"
        r = hostile(code, state_lost=False)
        assert r.error is not None
        assert "Read-only file system" in r.error.value or "No such file or directory" in r.error.value
        assert not (target / "planted.txt").exists()
        assert sb.execute("open('inside.txt', 'w').write('ok')").ok
        assert (sb.workdir / "inside.txt").read_text() == "ok"
    finally:
        shutil.rmtree(target)


def test_escape_attempts_fail_without_capabilities(hostile, sb):
    if not sb.isolation.capabilities_dropped:
        pytest.skip(f"capabilities are kept here: {sb.isolation.summary()}")
    code = (
        "import subprocess\n"
        "caps = open('/proc/self/status').read().split('CapEff:')[1].split()[0]\n"
        "umount = subprocess.run(['umount', '/proc'], capture_output=True).returncode\n"
        "hostname = subprocess.run(['hostname', 'pwned'], capture_output=True).returncode\n"
        "print(caps, umount != 0, hostname != 0)\n"
        "raise SystemExit"
    )
    r = hostile(code, state_lost=False)
    assert r.stdout.split() == ["0000000000000000", "True", "True"]
    assert socket.gethostname() != "pwned"
