"""run_isolated: one-shot programs under the isolation policy, their limits, and the refusal when it cannot hold."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox_support import live_descendants, processes_with, wait_until
from triforge.confine import isolation
from triforge.confine.isolation import IsolationPolicy, IsolationUnavailable
from triforge.confine.proc import ProcLimits
from triforge.confine.run import run_isolated, verified


def _py(tmp_path: Path, code: str, **kw):
    (tmp_path / "prog.py").write_text(code)
    return run_isolated([sys.executable, "-I", "prog.py"], workdir=tmp_path, timeout=kw.pop("timeout", 20), **kw)


def test_output_stdin_exit_code_and_workdir(tmp_path):
    run = _py(tmp_path, "import os, sys\nprint(sys.stdin.read().upper(), os.getcwd())\nopen('out', 'w').write('k')\n"
                        "sys.exit(3)", input="hello")
    r = run.result
    assert r.returncode == 3 and r.stdout.split() == ["HELLO", str(tmp_path.resolve())]
    assert (tmp_path / "out").read_text() == "k"
    assert r.cmd[0] == sys.executable and "private /tmp" in run.isolation


def test_environment_is_scrubbed_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    r = _py(tmp_path, "import os\nprint(sorted(os.environ))").result
    assert "OPENAI_API_KEY" not in r.stdout and "'HOME'" in r.stdout


@pytest.mark.parametrize(("code", "limits", "check"), [
    ("while True: pass", ProcLimits(), lambda r: r.timed_out),
    ("b = bytearray(2 << 30)", ProcLimits(memory_mb=512), lambda r: r.returncode != 0 and "MemoryError" in r.stderr),
    ("import os\nwhile True:\n    os.fork()", ProcLimits(max_processes=64), lambda r: r.timed_out or r.returncode),
    ("while True: print('y' * 1000)", ProcLimits(), lambda r: r.timed_out and r.stdout_truncated),
    ("import os\nos.kill(os.getpid(), 11)", ProcLimits(), lambda r: r.returncode != 0),
])
def test_hostile_programs_end_within_the_deadline_and_leave_nothing(tmp_path, code, limits, check):
    before = live_descendants()
    t0 = time.monotonic()
    r = _py(tmp_path, code, timeout=3, limits=limits, output_limit=10_000).result
    assert time.monotonic() - t0 < 3 + 5 and check(r), (r.returncode, r.stderr[-500:])
    assert wait_until(lambda: live_descendants() <= before)


def test_an_escaped_daemon_is_killed(tmp_path):
    marker = "765.4321"
    r = _py(tmp_path, f"import subprocess\nsubprocess.run('setsid sleep {marker} > /dev/null 2>&1 &', shell=True)").result
    assert r.returncode == 0
    assert wait_until(lambda: processes_with(marker) == [])


def test_workdir_under_the_hidden_home_stays_writable(tmp_path):
    work = Path.home() / f".triforge-run-test-{os.getpid()}"
    work.mkdir()
    try:
        r = _py(work, "open('x', 'w').write('1')\nimport os\nprint(os.listdir(os.path.expanduser('~')))").result
        assert r.returncode == 0 and (work / "x").read_text() == "1"
    finally:
        for f in work.iterdir():
            f.unlink()
        work.rmdir()


def test_read_only_widening_shows_a_hidden_path(tmp_path):
    data = Path.home() / f".triforge-data-test-{os.getpid()}"
    data.mkdir()
    (data / "d.txt").write_text("data")
    try:
        code = f"print(open({str(data / 'd.txt')!r}).read())\nopen({str(data / 'w')!r}, 'w')"
        hidden = _py(tmp_path, code).result
        assert hidden.returncode != 0 and "data" not in hidden.stdout
        shown = _py(tmp_path, code, policy=IsolationPolicy(read_only=(str(data),))).result
        assert shown.stdout.strip() == "data" and "Read-only file system" in shown.stderr
        assert not (data / "w").exists()
    finally:
        for f in data.iterdir():
            f.unlink()
        data.rmdir()


def test_refused_where_nothing_isolates_unless_turned_off(tmp_path, monkeypatch):
    monkeypatch.setattr(isolation, "mechanism", lambda: isolation.Mechanism("none", why_not="test: disabled"))
    with pytest.raises(IsolationUnavailable, match="test: disabled"):
        _py(tmp_path, "print(1)")
    run = _py(tmp_path, "print(1)", policy=IsolationPolicy(enabled=False))
    assert run.result.stdout.strip() == "1" and "NOT isolated" in run.isolation


def test_a_confinement_step_that_fails_refuses_the_run(tmp_path, monkeypatch):
    real = isolation.filesystem_spec

    def impossible(policy, writable):
        fs = real(policy, writable)
        fs["keep_rw"].append("/nonexistent-triforge-test")  # a writable path that is not there
        return fs

    monkeypatch.setattr(isolation, "filesystem_spec", impossible)
    with pytest.raises(IsolationUnavailable, match="filesystem not confined"):
        _py(tmp_path, "print('ran')")


def test_verified_reads_the_policy_back():
    iso = verified(IsolationPolicy())
    assert iso.network_isolated and iso.pid_namespace and iso.private_tmp and iso.home_hidden
    assert iso.capabilities_dropped and iso.writable_mounts is not None
    assert not verified(IsolationPolicy(network=True)).network_isolated


def test_the_launcher_never_mounts_in_the_namespace_it_was_started_in(tmp_path):
    """Started without a mount namespace of its own (by hand, or by a broken caller), the launcher must not
    cover /tmp and the home of the namespace it runs in. Run in a throwaway mount namespace that the spec
    calls the host's, so that a broken guard could not touch the real host's mounts."""
    import json
    import subprocess

    (tmp_path / "work").mkdir()
    launch = isolation.plan(IsolationPolicy(), tmp_path / "spec.json", writable=[str(tmp_path / "work")],
                            one_shot=True)
    spec = {**launch.spec, "cgroups": [], "rlimits": {}, "cwd": str(tmp_path / "work"), "exec_argv": ["true"]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    pretend = ("import json, os, sys\np = sys.argv[1]\nspec = json.load(open(p))\n"
               "spec['host_mount_namespace'] = os.readlink('/proc/self/ns/mnt')\njson.dump(spec, open(p, 'w'))\n"
               f"os.execv(sys.executable, [sys.executable, {str(isolation.LAUNCHER)!r}, p])")
    own_ns = ["--mount"] if os.geteuid() == 0 else ["--user", "--map-root-user", "--mount"]
    done = subprocess.run([isolation.mechanism().unshare[0], *own_ns, sys.executable, "-c", pretend,
                           str(tmp_path / "spec.json")], capture_output=True, text=True, timeout=60)
    assert done.returncode == isolation.CONFINEMENT_FAILED, done.stderr
    assert "not in a private mount namespace" in done.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir("/proc/driver"), reason="mounts a tmpfs inside /proc: root")
def test_mounts_inside_the_hosts_proc_stay_on_the_new_proc(tmp_path):
    """A container's view of /proc/driver/nvidia (the NVIDIA toolkit mounts one) must survive the sandbox's own
    /proc, or CUDA cannot start there; the new /proc still shows only the sandbox's processes."""
    import subprocess

    src = str(Path(__file__).resolve().parents[2] / "src")
    script = f"""
import subprocess, sys
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tfmark", "/proc/driver"], check=True)
open("/proc/driver/marker", "w").write("kept by the container")
sys.path.insert(0, {src!r})
from triforge.confine.run import run_isolated
r = run_isolated(["sh", "-c", "cat /proc/driver/marker; echo; ls /proc | grep -c '^[0-9]'"], workdir={str(tmp_path)!r},
                 timeout=30)
print(r.result.returncode, repr(r.result.stdout), r.result.stderr[-300:])
"""
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
    rc, out = done.stdout.split(" ", 1)[0], done.stdout.split(" ", 1)[1]
    assert rc == "0" and "kept by the container" in out, done.stdout
    n_procs = int(out.split("\\n")[1])
    assert n_procs < 10, f"the sandbox's /proc shows {n_procs} processes: not its own PID namespace"


def test_own_proc_is_writable_but_the_kernels_knobs_are_not(tmp_path):
    """CUDA names its threads through /proc/self/task/<tid>/comm and fails to start (error 304) on a read-only
    /proc; the sandbox's own /proc must allow that, while /proc/sys and the like stay read-only."""
    run = _py(tmp_path, """
import ctypes, os, threading, time
libc = ctypes.CDLL(None)
t = threading.Thread(target=time.sleep, args=(1,)); t.start()
print("setname", libc.pthread_setname_np(ctypes.c_ulong(t.ident), b"cuda-EvtHandlr"))
print("named", open(f"/proc/self/task/{t.native_id}/comm").read().strip())
t.join()
for line in open("/proc/self/mountinfo"):
    f = line.split()
    if f[4] in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq"):
        print("mount", f[4], f[5].split(",")[0])
for path in ("/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches"):
    try:
        open(path, "w").write("x")
        print("wrote", path)
    except OSError as exc:
        print("refused", path, exc.errno)
""")
    out = run.result.stdout
    assert "setname 0" in out and "named cuda-EvtHandlr" in out, out + run.result.stderr
    assert "wrote" not in out, out
    assert all(line.endswith(" ro") for line in out.splitlines() if line.startswith("mount")), out
    if os.path.exists("/proc/sys"):
        assert "mount /proc/sys ro" in out, out


def test_a_private_tmp_is_bounded_however_its_files_are_cut(tmp_path, monkeypatch):
    """Its pages are memory that RLIMIT_AS does not count: files of any size, many of them, stop at the cap."""
    monkeypatch.setenv(isolation.TMP_ENV, "24")
    code = ("import errno, os\nwritten = 0\nfor top in ('/tmp', '/var/tmp', '/dev/shm'):\n"
            "    n = 0\n    try:\n        for i in range(200):\n"
            "            with open(f'{top}/f{i}', 'wb') as f:\n                f.write(b'x' * (1 << 20))\n"
            "                f.flush()\n            n += 1\n"
            "    except OSError as e:\n        assert e.errno == errno.ENOSPC, e\n"
            "    print(top, n)\n")
    r = _py(tmp_path, code, timeout=30).result
    assert r.returncode == 0, r.stderr[-800:]
    counts = {line.split()[0]: int(line.split()[1]) for line in r.stdout.splitlines()}
    assert set(counts) == {"/tmp", "/var/tmp", "/dev/shm"} and all(20 <= n <= 24 for n in counts.values()), counts


@pytest.mark.parametrize("value", ["lots", "0", "-5"])
def test_a_bad_private_tmp_size_is_one_line_error(tmp_path, monkeypatch, value):
    monkeypatch.setenv(isolation.TMP_ENV, value)
    with pytest.raises(isolation.UserError, match="TRIFORGE_TMP_MB"):
        _py(tmp_path, "print(1)")


SPREAD = ("import subprocess, sys\n"
          "child = \"import time\\nhog = []\\nfor _ in range(12):\\n    hog.append(b'x' * (10 << 20))\\n"
          "    time.sleep(0.02)\\ntime.sleep(5)\"\n"
          "ps = [subprocess.Popen([sys.executable, '-c', child]) for _ in range(5)]\n"
          "codes = [p.wait() for p in ps]\n"
          "print(codes)\n"
          "sys.exit(0 if all(c == 0 for c in codes) else 1)\n")


def spread_is_stopped(r, limit_mb: int) -> bool:
    """Five children of 120 MB each: each under its own RLIMIT_AS, 600 MB together. A memory cgroup (root) or
    the tree's measurement (an ordinary user) stops them; the latter says so on stderr."""
    if r.returncode == 0 or r.timed_out:
        return False
    return os.geteuid() == 0 or f"went past {limit_mb} MiB together" in r.stderr


def test_memory_spread_over_child_processes_is_bounded_together(tmp_path):
    r = _py(tmp_path, SPREAD, timeout=30, limits=ProcLimits(memory_mb=256)).result
    assert spread_is_stopped(r, 256), (r.returncode, r.stdout, r.stderr[-600:])
    honest = _py(tmp_path, SPREAD.replace("range(5)", "range(1)"), timeout=30, limits=ProcLimits(memory_mb=512))
    assert honest.result.returncode == 0, honest.result.stderr[-600:]  # one child of 120 MB stays within


FILL = ("import time\nfor i in range(N):\n    with open(f'f{i}', 'wb') as f:\n        f.write(b'x' * (10 << 20))\n"
        "    time.sleep(0.02)\ntime.sleep(3)\n")


def test_a_working_folder_that_grows_past_its_limit_stops_the_program(tmp_path):
    """Each file is under RLIMIT_FSIZE; the folder as a whole is what would fill the disk."""
    (tmp_path / "w").mkdir()
    (tmp_path / "h").mkdir()
    t0 = time.monotonic()
    r = _py(tmp_path / "w", FILL.replace("N", "40"), timeout=30, limits=ProcLimits(folder_mb=100)).result
    assert r.returncode != 0 and "working folder grew by more than 100 MiB" in r.stderr, r.stderr[-600:]
    assert time.monotonic() - t0 < 10 and len(list((tmp_path / "w").glob("f*"))) <= 14
    honest = _py(tmp_path / "h", FILL.replace("N", "5").replace("time.sleep(3)", ""), timeout=30,
                 limits=ProcLimits(folder_mb=100)).result
    assert honest.returncode == 0, honest.stderr[-600:]


def test_a_folder_with_too_many_entries_counts_as_past_any_limit(tmp_path):
    from triforge.confine.tree import folder_mb

    for i in range(30):
        (tmp_path / f"e{i}").write_bytes(b"x" * 5000)
    assert 0.1 < folder_mb(tmp_path) < 1 and folder_mb(tmp_path, max_entries=20) == float("inf")


def test_a_folder_too_large_to_measure_from_the_start_is_not_watched(tmp_path, monkeypatch):
    """Counting a huge folder every 0.1 s would cost a core: a run that starts in one has no folder watch."""
    from triforge.confine import proc, tree

    monkeypatch.setattr(proc, "folder_mb", lambda path: tree.folder_mb(path, max_entries=20))
    big, small = tmp_path / "big", tmp_path / "small"
    big.mkdir()
    small.mkdir()
    for i in range(30):
        (big / f"e{i}").write_text("x")
    assert proc.watches(set, folder=(big, 1)) is None
    watch = proc.watches(set, folder=(small, 1))
    assert watch is not None and watch() is None
    (small / "f").write_bytes(b"x" * (2 << 20))
    assert "grew by more than 1 MiB" in (watch() or "")


def _server(tmp_path: Path, code: str, limits: ProcLimits, policy=None):
    """A long-lived process (a warm server, the lab worker) running `code`, then sleeping."""
    from triforge.confine.run import IsolatedProcess

    (tmp_path / "prog.py").write_text(code + "\nimport time\ntime.sleep(60)\n")
    return IsolatedProcess([sys.executable, "-I", "prog.py"], workdir=tmp_path, limits=limits, policy=policy,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ends(p, within: float = 15.0) -> bool:
    try:
        p.popen.wait(within)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_a_long_lived_process_whose_children_spread_memory_is_stopped(tmp_path):
    """Under a memory cgroup (root) the children are killed inside it and the server lives on; without one
    (an ordinary user) the tree's measurement stops the whole process and says why."""
    code = SPREAD.replace("print(codes)\nsys.exit(0 if all(c == 0 for c in codes) else 1)\n",
                          "open('codes.txt', 'w').write(repr(codes))\n")
    p = _server(tmp_path, code, ProcLimits(memory_mb=256))
    try:
        if p._cgroups is not None and "memory" in p._cgroups.dirs:
            assert wait_until(lambda: (tmp_path / "codes.txt").exists(), 20)
            assert any(c != 0 for c in eval((tmp_path / "codes.txt").read_text())), "all five children kept 120 MB"
        else:
            assert _ends(p), "five children of 120 MB each stayed alive under a 256 MiB limit"
            assert "went past 256 MiB together" in (p.stopped or ""), p.stopped
    finally:
        p.close()


def test_a_long_lived_process_that_fills_its_folder_is_stopped_and_an_honest_one_is_not(tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "h").mkdir()
    p = _server(tmp_path / "w", FILL.replace("N", "40"), ProcLimits(folder_mb=100))
    honest = _server(tmp_path / "h", FILL.replace("N", "5"), ProcLimits(folder_mb=100))
    try:
        assert _ends(p) and "working folder grew by more than 100 MiB" in (p.stopped or ""), p.stopped
        assert len(list((tmp_path / "w").glob("f*"))) <= 30  # 10 MB every 0.02 s; the watch thread may lag on a loaded machine
        assert honest.popen.poll() is None and honest.stopped is None
    finally:
        p.close()
        honest.close()


def _widened(extra: Path) -> IsolationPolicy:
    return IsolationPolicy.from_env().widened(writable=(str(extra),))


def test_a_folder_made_writable_besides_the_working_folder_counts_toward_the_folder_limit(tmp_path):
    """A widening (astra's compile cache) is a second place to fill the disk: the limit holds both together,
    and the files already there when the run starts count for nothing."""
    (tmp_path / "w").mkdir()
    extra = tmp_path / "cache"
    extra.mkdir()
    (extra / "old.bin").write_bytes(b"x" * (150 << 20))  # already there: not growth
    fill = FILL.replace("N", "40").replace("f'f{i}'", f"'{extra}/f%d' % i")
    r = _py(tmp_path / "w", fill, timeout=30, limits=ProcLimits(folder_mb=100), policy=_widened(extra)).result
    assert r.returncode != 0 and "grew by more than 100 MiB together" in r.stderr, r.stderr[-600:]
    assert str(extra) in r.stderr and len(list(extra.glob("f*"))) <= 20
    # spread over both folders: neither alone passes 100 MiB, together they do
    for f in extra.glob("f*"):
        f.unlink()
    half = FILL.replace("N", "7").replace("time.sleep(3)", "")
    both = (half + half.replace("f'f{i}'", f"'{extra}/f%d' % i")) + "time.sleep(3)\n"
    r = _py(tmp_path / "w", both, timeout=30, limits=ProcLimits(folder_mb=100), policy=_widened(extra)).result
    assert r.returncode != 0 and "grew by more than 100 MiB together" in r.stderr, r.stderr[-600:]
    honest = _py(tmp_path / "w", FILL.replace("N", "3").replace("f'f{i}'", f"'{extra}/h%d' % i"), timeout=30,
                 limits=ProcLimits(folder_mb=100), policy=_widened(extra)).result
    assert honest.returncode == 0, honest.stderr[-600:]


def test_a_long_lived_process_filling_a_widened_folder_is_stopped(tmp_path):
    (tmp_path / "w").mkdir()
    extra = tmp_path / "cache"
    extra.mkdir()
    p = _server(tmp_path / "w", FILL.replace("N", "40").replace("f'f{i}'", f"'{extra}/f%d' % i"),
                ProcLimits(folder_mb=100), policy=_widened(extra))
    try:
        assert _ends(p) and "grew by more than 100 MiB together" in (p.stopped or ""), p.stopped
        assert len(list(extra.glob("f*"))) <= 30
    finally:
        p.close()


def test_a_large_folder_is_measured_less_often_and_still_caught(tmp_path, monkeypatch):
    """A folder whose measuring is slow (a big shared cache) is measured again after 20 times that: the
    watch costs a bounded share of a core, and growth there is still found."""
    from triforge.confine import proc, tree

    calls = {"slow": 0}

    def measured(path):
        if path.endswith("slow"):
            calls["slow"] += 1
            time.sleep(0.01)
        return tree.folder_mb(path)

    monkeypatch.setattr(proc, "folder_mb", measured)
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    fast.mkdir()
    slow.mkdir()
    watch = proc.watches(set, folder=((fast, slow), 1))
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:
        assert watch() is None
        time.sleep(0.01)
    # about 1 s / (20 x 10 ms) = 5 measurements, not one per check (about 90)
    assert 2 <= calls["slow"] <= 12, calls
    (slow / "f").write_bytes(b"x" * (2 << 20))
    time.sleep(0.3)
    assert "grew by more than 1 MiB together" in (watch() or "")


# Disk held by files that are no longer in the folder: deleted while open or mapped, by the program or a child.
HELD = {
    "open-then-deleted": """
import os, time
keep = []
for i in range(40):
    f = open(f'x{i}', 'wb'); os.unlink(f'x{i}'); f.write(b'x' * (10 << 20)); f.flush(); keep.append(f)
    time.sleep(0.02)
time.sleep(3)
""",
    "mapped-then-deleted": """
import mmap, os, time
keep = []
for i in range(40):
    with open(f'm{i}', 'wb+') as f:
        f.write(b'x' * (10 << 20)); f.flush()
        keep.append(mmap.mmap(f.fileno(), 0))
    os.unlink(f'm{i}')
    time.sleep(0.02)
time.sleep(3)
""",
    "held-by-a-child": """
import os, time
fs = [open(f'c{i}', 'wb') for i in range(40)]
if os.fork() == 0:
    time.sleep(30)
    os._exit(0)
for i, f in enumerate(fs):
    os.unlink(f'c{i}'); f.write(b'x' * (10 << 20)); f.flush(); f.close()
    time.sleep(0.02)
time.sleep(3)
""",
    "not-dumpable": """
import ctypes, os, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: its /proc entries owned by root
keep = []
for i in range(40):
    f = open(f'd{i}', 'wb'); os.unlink(f'd{i}'); f.write(b'x' * (10 << 20)); f.flush(); keep.append(f)
    time.sleep(0.02)
time.sleep(3)
""",
}


@pytest.mark.parametrize("name", sorted(HELD))
def test_disk_held_by_deleted_files_counts_toward_the_folder_limit(tmp_path, name):
    r = _py(tmp_path, HELD[name], timeout=30, limits=ProcLimits(folder_mb=100)).result
    assert r.returncode != 0 and "grew by more than 100 MiB" in r.stderr, (name, r.returncode, r.stderr[-600:])


def test_an_honest_temporary_file_is_left_alone(tmp_path):
    """tempfile.TemporaryFile is deleted at once and used through its fd: it counts, within the limit."""
    code = ("import tempfile\nfs = [tempfile.TemporaryFile() for _ in range(4)]\n"
            "for f in fs:\n    f.write(b'x' * (10 << 20)); f.flush()\nprint('ok')\n")
    r = _py(tmp_path, code, timeout=30, limits=ProcLimits(folder_mb=100)).result
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-600:]


def test_held_deleted_files_are_counted_once_and_only_under_the_roots(tmp_path):
    import mmap

    from triforge.confine.tree import held_deleted

    def held_deleted_mb(pids, roots):
        return sum(held_deleted(pids, roots).values()) / (1 << 20)

    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    f = open(inside / "a", "wb+")  # noqa: SIM115 - held open on purpose
    f.write(b"x" * (3 << 20))
    f.flush()
    m = mmap.mmap(f.fileno(), 0)  # open and mapped: once
    g = open(outside / "b", "wb")  # noqa: SIM115
    g.write(b"x" * (5 << 20))
    g.flush()
    try:
        assert held_deleted_mb({os.getpid()}, [str(inside)]) == 0  # not deleted yet
        os.unlink(inside / "a")
        os.unlink(outside / "b")
        assert 2.9 < held_deleted_mb({os.getpid()}, [str(inside)]) < 3.2
    finally:
        m.close()
        f.close()
        g.close()


def test_a_long_lived_process_holding_deleted_files_is_stopped(tmp_path):
    p = _server(tmp_path, HELD["open-then-deleted"], ProcLimits(folder_mb=100))
    try:
        assert _ends(p) and "grew by more than 100 MiB" in (p.stopped or ""), p.stopped
    finally:
        p.close()


# Memory no process's resident set shows: anonymous memory files (memfd_create), which RLIMIT_AS does not count.
MEMFD = {
    "written-and-held-open": """
import os, time
keep = []
for i in range(60):
    fd = os.memfd_create(f'm{i}'); os.write(fd, b'x' * (10 << 20)); keep.append(fd)
    time.sleep(0.02)
time.sleep(3)
""",
    "allocated-without-writing": """
import os, time
keep = []
for i in range(60):
    fd = os.memfd_create(f'a{i}'); os.posix_fallocate(fd, 0, 10 << 20); keep.append(fd)
    time.sleep(0.02)
time.sleep(3)
""",
    "mapped-untouched-then-closed": """
import mmap, os, time
keep = []
for i in range(60):
    fd = os.memfd_create(f'u{i}'); os.write(fd, b'x' * (10 << 20))
    keep.append(mmap.mmap(fd, 10 << 20)); os.close(fd)
    time.sleep(0.02)
time.sleep(3)
""",
    "held-by-a-child": """
import os, time
fds = [os.memfd_create(f'c{i}') for i in range(60)]
if os.fork() == 0:
    time.sleep(30)
    os._exit(0)
for fd in fds:
    os.write(fd, b'x' * (10 << 20)); os.close(fd)
    time.sleep(0.02)
time.sleep(3)
""",
}


@pytest.mark.parametrize("name", sorted(MEMFD))
def test_memory_in_anonymous_files_counts_toward_the_memory_limit(tmp_path, name):
    r = _py(tmp_path, MEMFD[name], timeout=30, limits=ProcLimits(memory_mb=256)).result
    if name == "mapped-untouched-then-closed" and os.geteuid() != 0:  # mappings are address space: RLIMIT_AS
        assert r.returncode != 0 and "Cannot allocate memory" in r.stderr, r.stderr[-600:]
        return
    assert spread_is_stopped(r, 256), (name, r.returncode, r.stdout, r.stderr[-600:])


def test_a_touched_anonymous_file_counts_once(tmp_path):
    """150 MB in a memfd, mapped and every page touched: in its PSS and in its blocks, counted once; within
    256 MiB it runs to its end."""
    code = ("import mmap, os\nfd = os.memfd_create('w'); os.ftruncate(fd, 150 << 20)\nm = mmap.mmap(fd, 150 << 20)\n"
            "for i in range(0, 150 << 20, 4096):\n    m[i] = 1\nimport time; time.sleep(1)\nprint('ok')\n")
    r = _py(tmp_path, code, timeout=30, limits=ProcLimits(memory_mb=256)).result
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-600:]


def test_anonymous_file_accounting_on_this_process():
    """The measurement itself, as root too (where a memory cgroup makes the watch unneeded): written and held
    counts its blocks; mapped and touched counts nothing beyond the PSS that already holds it."""
    import mmap

    from triforge.confine.tree import memfd_maps, memfd_mb, memfd_open

    me = {os.getpid()}
    base = memfd_mb(memfd_open(me), memfd_maps(me))
    held = os.memfd_create("held")
    os.write(held, b"x" * (20 << 20))
    touched = os.memfd_create("touched")
    os.ftruncate(touched, 30 << 20)
    m = mmap.mmap(touched, 30 << 20)
    try:
        for i in range(0, 30 << 20, 4096):
            m[i] = 1
        assert 19.5 < memfd_mb(memfd_open(me), memfd_maps(me)) - base < 21
    finally:
        m.close()
        os.close(held)
        os.close(touched)


SYSV = """
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
placed = 0
for i in range(60):
    sid = libc.shmget(0, 10 << 20, 0o1600)
    if sid < 0:
        break
    addr = libc.shmat(sid, None, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        break
    ctypes.memset(addr, 1, 10 << 20)
    libc.shmdt(ctypes.c_void_p(addr))
    placed += 10
print(placed)
"""


def test_detached_sysv_segments_are_bounded_by_the_memory_limit(tmp_path):
    """A detached segment's pages belong to no process: the sandbox's own IPC namespace holds at most the
    memory limit of them (and no more than a private /tmp). Under a memory cgroup (root) the cgroup may stop
    the program first."""
    r = _py(tmp_path, SYSV, timeout=30, limits=ProcLimits(memory_mb=256)).result
    if r.returncode == 0:
        assert int(r.stdout.split()[-1]) <= 256, r.stdout
    else:
        assert os.geteuid() == 0, r.stderr[-600:]
    honest = _py(tmp_path, SYSV.replace("range(60)", "range(3)"), timeout=30, limits=ProcLimits(memory_mb=256)).result
    assert honest.returncode == 0 and honest.stdout.split()[-1] == "30", honest.stderr[-600:]


# A host daemon's Unix socket is a way out whatever the mount says: connect() ignores a read-only mount, and
# D-Bus or systemd's socket starts programs outside, docker's gives root. They live under /run.
CONNECT = """
import socket, sys
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        print('reached', path)
    except OSError as e:
        print('refused', path, e.errno)
"""


def test_host_unix_sockets_under_run_are_not_reachable(tmp_path):
    import socket

    run_dir = Path("/run")
    listeners, paths = [], []
    if os.access(run_dir, os.W_OK):  # root: plant a daemon's socket at /run and one below a folder in it
        for rel in (f"tf-probe-{os.getpid()}.sock", f"tf-probe-{os.getpid()}/bus"):
            path = run_dir / rel
            path.parent.mkdir(exist_ok=True)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(str(path))
            s.listen(1)
            listeners.append((s, path))
            paths.append(str(path))
    paths += [p for p in ("/run/dbus/system_bus_socket", "/var/run/docker.sock", "/run/systemd/private")
              if os.path.exists(p)]
    (tmp_path / "prog.py").write_text(CONNECT + "import os\nprint('run holds', sorted(os.listdir('/run')))\n")
    try:
        r = run_isolated([sys.executable, "-I", "prog.py", *paths], workdir=tmp_path, timeout=20).result
    finally:
        for s, path in listeners:
            s.close()
            path.unlink()
        if listeners:
            (run_dir / f"tf-probe-{os.getpid()}").rmdir()
    assert r.returncode == 0, r.stderr[-600:]
    assert "reached" not in r.stdout and "run holds []" in r.stdout, r.stdout


def test_a_unix_socket_of_the_program_itself_works(tmp_path):
    """Honest use: a server and client of the program's own, in its working folder."""
    code = ("import os, socket\ns = socket.socket(socket.AF_UNIX); s.bind('own.sock'); s.listen(1)\n"
            "c = socket.socket(socket.AF_UNIX); c.connect('own.sock'); a, _ = s.accept(); c.sendall(b'hi')\n"
            "print(a.recv(2).decode())\n")
    r = _py(tmp_path, code).result
    assert r.returncode == 0 and r.stdout.strip() == "hi", r.stderr[-600:]


def test_a_host_socket_anywhere_visible_is_masked(tmp_path):
    """Outside the covered places too (LXD's socket lives under /var/snap): every socket a host process
    listens on is masked in the sandbox. Planted in a folder handed in read-only, which the sandbox sees."""
    import socket

    shown = tmp_path / "shown"
    shown.mkdir()
    plant = shown / "daemon.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(plant))
    s.listen(1)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "prog.py").write_text(CONNECT + "import os\nprint('seen', os.path.exists(sys.argv[1]))\n")
    policy = IsolationPolicy.from_env().widened(read_only=(str(shown),))
    try:
        r = run_isolated([sys.executable, "-I", "prog.py", str(plant)], workdir=tmp_path / "w", timeout=20,
                         policy=policy).result
    finally:
        s.close()
    assert r.returncode == 0 and "seen True" in r.stdout, (r.stdout, r.stderr[-600:])  # the folder is there
    assert "reached" not in r.stdout and "refused" in r.stdout, (r.stdout, r.stderr[-600:])


DEVICES = """
import multiprocessing, os, subprocess, sys
print('dev', sorted(os.listdir('/dev')))
for p in sys.argv[1:]:
    try:
        os.close(os.open(p, os.O_RDONLY | os.O_NONBLOCK))
        print('OPENED', p)
    except OSError:
        pass
with open('/dev/null', 'w') as f:
    f.write('x')
assert len(open('/dev/urandom', 'rb').read(8)) == 8
m, s = os.openpty()
os.write(m, b'hi\\n')
assert os.read(s, 3) == b'hi\\n'
open('/dev/shm/x', 'w').write('x')
lock = multiprocessing.Lock()  # a POSIX semaphore in /dev/shm
with lock:
    pass
print(subprocess.run(['true'], stdin=subprocess.DEVNULL).returncode, os.path.realpath('/dev/stdout'))
"""


def test_only_the_usual_device_nodes_are_there(tmp_path):
    """The host's /dev has raw disks, /dev/kvm, loop devices: uid 0 opens them without any capability, and a
    read-only mount does not stop writes to a device. The sandbox gets a /dev of null, zero, full, random,
    urandom, tty, ptmx and pts; what programs use of them keeps working."""
    host = sorted(str(p) for p in Path("/dev").iterdir() if p.is_block_device() or p.name in ("kvm", "fuse", "mem",
                                                                                            "kmsg", "loop-control"))
    (tmp_path / "prog.py").write_text(DEVICES)
    r = run_isolated([sys.executable, "-I", "prog.py", *host], workdir=tmp_path, timeout=30).result
    assert r.returncode == 0, r.stderr[-800:]
    seen = eval(r.stdout.split("dev ", 1)[1].splitlines()[0])
    assert set(seen) <= {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "fd", "stdin", "stdout",
                         "stderr", "shm"}, seen
    assert {"null", "urandom", "shm", "fd"} <= set(seen) and "OPENED" not in r.stdout, r.stdout


def test_the_isolation_read_back_says_whether_dev_and_run_are_the_hosts():
    held = verified(IsolationPolicy.from_env())
    assert held.own_dev and held.run_hidden and "own /dev; /run hidden" in held.confinement()
    gpu = verified(IsolationPolicy.from_env().widened(host_devices=True))
    assert not gpu.own_dev and "host /dev" in gpu.confinement()
