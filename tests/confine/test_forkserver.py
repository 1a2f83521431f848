"""The confined fork server: each program in a fresh child with a one-shot run's limits, nothing left for the next.

The hostile programs of test_sandbox_run.py run here through `run_forked`; and what only a shared server
could allow is tried too: state left for the next program, a daemon left behind, the server's memory
and socket, killing the server.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

from sandbox_support import processes_with, wait_until
from triforge.confine import forkserver
from triforge.confine.proc import ProcLimits


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    path = tmp_path_factory.mktemp("runtime")
    path.chmod(0o700)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(forkserver.ENV_DIR, str(path))
        mp.delenv(forkserver.ENV_SWITCH, raising=False)
        mp.delenv("TRIFORGE_ISOLATION", raising=False)
        yield path
        forkserver.stop_all(path)


def _py(work: Path, code: str, **kw):
    work.mkdir(exist_ok=True)
    (work / "prog.py").write_text(code)
    res = forkserver.run_forked([sys.executable, "-I", str(work / "prog.py")], workdir=work,
                                timeout=kw.pop("timeout", 20), **kw)
    assert res is not None, "the fork server did not take the run"
    return res


def _servers(runtime: Path) -> list[int]:
    groups = []
    for meta in runtime.glob("fs-*/s*/server.json"):
        groups.append(json.loads(meta.read_text())["group"])
    return groups


def test_output_stdin_exit_code_files_and_isolation(runtime, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    run = _py(tmp_path / "w", "import os, sys\nprint(sys.stdin.read().upper(), sorted(os.environ))\n"
                              "open('out', 'w').write('k')\nsys.exit(3)", input="hello")
    r = run.result
    assert r.returncode == 3 and r.stdout.startswith("HELLO") and not r.timed_out
    assert "OPENAI_API_KEY" not in r.stdout and "'HOME'" in r.stdout
    assert (tmp_path / "w" / "out").read_text() == "k"
    for held in ("private /tmp", "own PID namespace", "no capabilities", "home hidden", "loopback only"):
        assert held in run.isolation, run.isolation


def test_an_uncaught_exception_prints_the_programs_traceback(runtime, tmp_path):
    r = _py(tmp_path / "w", "def f():\n    return 1 / 0\nf()\n").result
    assert r.returncode == 1 and "ZeroDivisionError" in r.stderr and "prog.py\", line 2, in f" in r.stderr
    assert "forkserver_main" not in r.stderr  # the server's own frames stay out of the program's traceback


@pytest.mark.parametrize(("code", "limits", "check"), [
    ("while True: pass", ProcLimits(), lambda r: r.timed_out),
    ("b = bytearray(2 << 30)", ProcLimits(memory_mb=512), lambda r: r.returncode != 0 and "MemoryError" in r.stderr),
    ("import os\nwhile True:\n    os.fork()", ProcLimits(max_processes=64), lambda r: r.timed_out or r.returncode),
    ("while True: print('y' * 1000)", ProcLimits(), lambda r: r.timed_out and r.stdout_truncated),
    ("import os\nos.kill(os.getpid(), 11)", ProcLimits(), lambda r: r.returncode == -11),
    ("import time\nwhile True: time.sleep(1)", ProcLimits(cpu_seconds=1), lambda r: r.timed_out),
])
def test_hostile_programs_end_within_the_deadline(runtime, tmp_path, code, limits, check):
    t0 = time.monotonic()
    r = _py(tmp_path / "w", code, timeout=3, limits=limits, output_limit=10_000).result
    assert time.monotonic() - t0 < 3 + 5 and check(r), (r.returncode, r.timed_out, r.stderr[-500:])
    # and the next program runs normally on the same server
    assert _py(tmp_path / "v", "print('next')").result.stdout.strip() == "next"


def test_cpu_time_is_limited_in_the_child(runtime, tmp_path):
    r = _py(tmp_path / "w", "while True: pass", timeout=30, limits=ProcLimits(cpu_seconds=1)).result
    assert not r.timed_out and r.returncode in (-24, -9), r  # SIGXCPU at the soft limit


def test_an_escaped_daemon_is_killed(runtime, tmp_path):
    marker = "765.4322"
    r = _py(tmp_path / "w", f"import subprocess\nsubprocess.run('setsid sleep {marker} > /dev/null 2>&1 &', "
                            "shell=True)").result
    assert r.returncode == 0
    assert wait_until(lambda: processes_with(marker) == [])


def test_nothing_is_left_for_the_next_program(runtime, tmp_path):
    token = uuid.uuid4().hex
    first = _py(tmp_path / "a", f"""
import os, subprocess
for path in ('/tmp/left', '/var/tmp/left', '/dev/shm/left', '../left', os.path.expanduser('~/left')):
    try:
        open(path, 'w').write('{token}')
    except OSError as e:
        print('not written', path, e)
subprocess.Popen(['sh', '-c', 'sleep 1; echo {token} > /tmp/later'], start_new_session=True)
print('done')
""").result
    assert first.returncode == 0 and "done" in first.stdout, first.stderr
    time.sleep(1.5)
    second = _py(tmp_path / "b", f"""
import os
hits = []
for top in ('/tmp', '/var/tmp', '/dev/shm', '..'):
    for root, _, files in os.walk(top):
        for f in files:
            try:
                if b'{token[:16]}' + b'{token[16:]}' in open(os.path.join(root, f), 'rb').read(1 << 16):
                    hits.append(os.path.join(root, f))
            except OSError:
                pass
print('hits', hits)
""").result
    assert second.returncode == 0 and "hits []" in second.stdout, second.stdout + second.stderr
    assert not Path("/tmp/left").exists() or token not in Path("/tmp/left").read_text()


def test_the_host_stays_out_of_reach(runtime, tmp_path):
    planted = Path("/tmp") / f"triforge-fork-planted-{uuid.uuid4().hex[:8]}"
    secret_file = Path.home() / f".triforge-fork-secret-{uuid.uuid4().hex[:8]}"
    secret = uuid.uuid4().hex
    secret_file.write_text(secret)
    secret_file.chmod(0o600)
    try:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            listener.settimeout(0.3)
            r = _py(tmp_path / "w", f"""
import socket
for name, fn in [("write", lambda: open({str(planted)!r}, "w").write("x")),
                 ("read", lambda: open({str(secret_file)!r}).read()),
                 ("net", lambda: socket.create_connection(("127.0.0.1", {listener.getsockname()[1]}), timeout=2))]:
    try:
        print(name, "GOT", fn())
    except Exception as e:
        print(name, "FAILED", type(e).__name__)
""").result
            assert "net FAILED" in r.stdout and "read FAILED" in r.stdout, r.stdout + r.stderr
            assert secret not in r.stdout + r.stderr and not planted.exists()
            with pytest.raises(TimeoutError):
                listener.accept()
    finally:
        secret_file.unlink()
        planted.unlink(missing_ok=True)


def test_a_program_cannot_reach_the_server(runtime, tmp_path):
    """Its memory (it is not dumpable), its socket (bound where no program sees it; and a peer inside its
    namespace is refused), new namespaces (seccomp), and it cannot kill it (PID 1 of the namespace)."""
    r = _py(tmp_path / "w", f"""
import ctypes, glob, os, signal
out = []
try:
    open('/proc/1/mem', 'r+b'); out.append('mem OPEN')
except OSError as e:
    out.append('mem ' + type(e).__name__)
socks = glob.glob({str(runtime)!r} + '/**/*.sock', recursive=True)
out.append('socks %d' % len(socks))
libc = ctypes.CDLL(None, use_errno=True)
out.append('unshare %d' % libc.unshare(0x00020000))
os.kill(1, signal.SIGKILL)
print(' '.join(out))
""").result
    assert r.returncode == 0, r.stderr
    assert "mem OPEN" not in r.stdout and "socks 0" in r.stdout and "unshare -1" in r.stdout, r.stdout
    assert _py(tmp_path / "v", "print('alive')").result.stdout.strip() == "alive"


def test_a_killed_server_is_replaced(runtime, tmp_path):
    assert _py(tmp_path / "a", "print(1)").result.returncode == 0
    for group in _servers(runtime):
        os.killpg(group, 9)
    r = _py(tmp_path / "b", "print(2)").result
    assert r.returncode == 0 and r.stdout.strip() == "2", r.stderr


def test_a_server_leaves_when_idle(tmp_path, monkeypatch):
    folder = tmp_path / "rt"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv(forkserver.ENV_DIR, str(folder))
    monkeypatch.setenv(forkserver.ENV_IDLE, "1")
    assert _py(tmp_path / "w", "print(1)").result.returncode == 0
    groups = _servers(folder)
    assert groups and wait_until(lambda: not any(Path(f"/proc/{g}").exists() and
                                                 b"Z" not in Path(f"/proc/{g}/stat").read_bytes().split()[2:3]
                                                 for g in groups), timeout=10)


def test_runs_it_cannot_take_fall_back(tmp_path, monkeypatch):
    (tmp_path / "p.py").write_text("print(1)")
    assert forkserver.run_forked(["/bin/echo", "x"], workdir=tmp_path, timeout=5) is None
    monkeypatch.setenv(forkserver.ENV_SWITCH, "0")
    assert forkserver.run_forked([sys.executable, str(tmp_path / "p.py")], workdir=tmp_path, timeout=5) is None
    r = forkserver.run_confined([sys.executable, str(tmp_path / "p.py")], workdir=tmp_path, timeout=20)
    assert r.result.stdout.strip() == "1"


def test_someone_elses_runtime_folder_is_not_used(tmp_path, monkeypatch):
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setenv(forkserver.ENV_DIR, str(folder))
    assert forkserver.runtime_dir() is None


def test_memory_spread_over_child_processes_is_bounded_together(runtime, tmp_path):
    from test_sandbox_run import SPREAD, spread_is_stopped

    r = _py(tmp_path / "w", SPREAD, timeout=30, limits=ProcLimits(memory_mb=384)).result
    assert spread_is_stopped(r, 384), (r.returncode, r.stdout, r.stderr[-600:])
    honest = _py(tmp_path / "h", SPREAD.replace("range(5)", "range(1)"), timeout=30, limits=ProcLimits(memory_mb=768))
    assert honest.result.returncode == 0, honest.result.stderr[-600:]


def test_a_working_folder_that_grows_past_its_limit_stops_the_program(runtime, tmp_path):
    from test_sandbox_run import FILL

    r = _py(tmp_path / "w", FILL.replace("N", "40"), timeout=30, limits=ProcLimits(folder_mb=100)).result
    assert r.returncode != 0 and "working folder grew by more than 100 MiB" in r.stderr, r.stderr[-600:]
    honest = _py(tmp_path / "h", FILL.replace("N", "5").replace("time.sleep(3)", ""), timeout=30,
                 limits=ProcLimits(folder_mb=100)).result
    assert honest.returncode == 0 and len(list((tmp_path / "h").glob("f*"))) == 5, honest.stderr[-600:]


def test_disk_held_by_deleted_files_counts_toward_the_folder_limit(runtime, tmp_path):
    from test_sandbox_run import HELD

    for name in ("open-then-deleted", "mapped-then-deleted"):
        r = _py(tmp_path / name, HELD[name], timeout=30, limits=ProcLimits(folder_mb=100)).result
        assert r.returncode != 0 and "grew by more than 100 MiB" in r.stderr, (name, r.stderr[-600:])


IPC_LEAVE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
sid = libc.shmget(0x5eed, 4096, 0o1666)
addr = libc.shmat(sid, None, 0)
ctypes.memmove(addr, b'secret-of-run-A', 15)
libc.shmdt(ctypes.c_void_p(addr))
sem = libc.semget(0x5eee, 1, 0o1666)
q = libc.msgget(0x5eef, 0o1666)
msg = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + 16)
ctypes.memmove(msg, ctypes.byref(ctypes.c_long(1)), ctypes.sizeof(ctypes.c_long))
ctypes.memmove(ctypes.addressof(msg) + ctypes.sizeof(ctypes.c_long), b'secret', 6)
sent = libc.msgsnd(q, msg, 6, 0)
mq = libc.mq_open(b'/tf-left', os.O_CREAT | os.O_RDWR, 0o600, None)
print(sid >= 0, sem >= 0, q >= 0, sent == 0, mq >= 0 and libc.mq_send(mq, b'secret', 6, 0) == 0)
"""
IPC_FIND = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget(0x5eed, 0, 0), libc.semget(0x5eee, 0, 0), libc.msgget(0x5eef, 0), libc.mq_open(b'/tf-left', 0))
"""


def test_ipc_objects_of_one_program_are_gone_for_the_next(runtime, tmp_path):
    """Programs share the server's IPC namespace: a SysV segment, semaphore set or queue, or a POSIX message
    queue, one leaves behind (memory no process holds, and a channel to the next program by its key or name)
    is removed when it ends."""
    left = _py(tmp_path / "a", IPC_LEAVE).result
    assert left.stdout.split() == ["True"] * 5, left.stderr[-600:]
    found = _py(tmp_path / "b", IPC_FIND).result
    assert found.stdout.split() == ["-1", "-1", "-1", "-1"], found.stdout


def test_host_sockets_under_run_are_not_seen(runtime, tmp_path):
    r = _py(tmp_path / "w", "import os\nprint(sorted(os.listdir('/run')), os.path.exists('/var/run/dbus'))\n").result
    assert r.returncode == 0 and r.stdout.split() == ["[]", "False"], (r.stdout, r.stderr[-600:])
