"""Escape attempts by class, on both paths (kernel cells and one-shot programs), as whoever runs the tests,
and (from root) the whole file again as an unprivileged user.

Every attempt is judged on the host: the listener saw no connection, the planted file is not there,
the secret is not in the output, the host process still runs. Each class also has an honest twin
(inside the workdir, the sandbox's own loopback, its own processes) that must keep working.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from triforge.confine.run import run_isolated
from triforge.sandbox.kernel_sandbox import KernelSandbox


@dataclass
class Outcome:
    output: str  # everything the code printed, errors included


Runner = Callable[[str], Outcome]


@pytest.fixture(scope="module")
def kernel() -> Iterator[KernelSandbox]:
    with KernelSandbox(output_limit=50_000) as sb:
        yield sb


@pytest.fixture(params=["kernel", "program"])
def run(request, kernel, tmp_path) -> Runner:
    """Runs attempt code on one path; the code prints what it got (or the error)."""
    if request.param == "kernel":
        def in_kernel(code: str) -> Outcome:
            r = kernel.execute(code, timeout=20)
            err = f"{r.error.name}: {r.error.value}" if r.error else ""
            return Outcome(f"{r.stdout}{r.stderr}{r.result or ''}{err}")
        return in_kernel

    import sys

    def as_program(code: str) -> Outcome:
        work = tmp_path / f"prog-{uuid.uuid4().hex[:6]}"
        work.mkdir()
        (work / "attempt.py").write_text(code)
        res = run_isolated([sys.executable, "-I", "attempt.py"], workdir=work, timeout=20).result
        return Outcome(res.stdout + res.stderr)
    return as_program


def _try(expr: str) -> str:
    """Code that evaluates `expr` and prints its value, or the error it raised."""
    return (f"try:\n    print('GOT', repr({expr}))\nexcept BaseException as e:\n"
            f"    print('FAILED', type(e).__name__, e)\n")


def _own_address() -> str | None:
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


@pytest.fixture
def listener(request) -> Iterator[socket.socket]:
    host = request.param
    if host == "own":
        host = _own_address()
        if host is None:
            pytest.skip("no non-loopback IPv4 address on this machine")
    with socket.socket() as s:
        s.bind((host, 0))
        s.listen()
        s.settimeout(0.3)
        yield s


def _connect(addr: tuple[str, int]) -> str:
    return _try(f"__import__('socket').create_connection({addr!r}, timeout=2).close() or 'connected'")


@pytest.mark.parametrize("listener", ["127.0.0.1", "own"], indirect=True)
def test_host_listener_is_unreachable(run, listener):
    out = run(_connect(listener.getsockname())).output
    assert "GOT" not in out and "FAILED" in out, out
    with pytest.raises(TimeoutError):
        listener.accept()


def test_own_loopback_still_works(run):
    code = ("import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
            "c = socket.create_connection(s.getsockname(), timeout=2); print('LOOP', s.accept()[1][0])")
    assert "LOOP 127.0.0.1" in run(code).output


@pytest.fixture
def host_dirs(tmp_path_factory) -> Iterator[dict[str, Path]]:
    """A fresh host directory in /tmp and one in the home, both writable by the test; removed after."""
    tag = uuid.uuid4().hex[:8]
    tmp = Path("/tmp") / f"triforge-escape-{tag}"
    home = Path.home() / f".triforge-escape-{tag}"
    for d in (tmp, home):
        d.mkdir()
    yield {"tmp": tmp, "home": home}
    for d in (tmp, home):
        for f in d.iterdir():
            f.unlink()
        d.rmdir()


WRITES = {
    "host /tmp": lambda d, wd: f"open({str(d['tmp'] / 'planted')!r}, 'w').write('x')",
    "home": lambda d, wd: f"open({str(d['home'] / 'planted')!r}, 'w').write('x')",
    "/proc/self/root": lambda d, wd: f"open('/proc/self/root' + {str(d['tmp'] / 'planted')!r}, 'w').write('x')",
    "..": lambda d, wd: f"open(os.path.relpath({str(d['tmp'] / 'planted')!r}), 'w').write('x')",
    "symlink to /tmp": lambda d, wd: (f"os.symlink({str(d['tmp'] / 'planted')!r}, 'link-t') or "
                                      f"open('link-t', 'w').write('x')"),
    "symlink to home": lambda d, wd: (f"os.symlink({str(d['home'] / 'planted')!r}, 'link-h') or "
                                      f"open('link-h', 'w').write('x')"),
}


@pytest.mark.parametrize("how", list(WRITES))
def test_writes_outside_the_workdir_do_not_reach_the_host(run, host_dirs, how):
    (host_dirs["tmp"] / "control").write_text("the test can write here")
    out = run("import os\n" + _try(WRITES[how](host_dirs, None))).output
    assert not (host_dirs["tmp"] / "planted").exists() and not (host_dirs["home"] / "planted").exists(), out


def test_writes_inside_the_workdir_work(run, kernel):
    out = run("import os\n" + _try("open('mine.txt', 'w').write('abc')") + _try("open('mine.txt').read()")).output
    assert "GOT 'abc'" in out


def test_a_private_file_in_home_cannot_be_read(run):
    secret = f"secret-{uuid.uuid4().hex}"
    path = Path.home() / f".triforge-escape-secret-{uuid.uuid4().hex[:8]}"
    path.write_text(secret)
    path.chmod(0o600)
    try:
        out = run(_try(f"open({str(path)!r}).read()") + _try("open('/proc/self/root' + " + repr(str(path)) +
                                                              ").read()")).output
        assert secret not in out and "GOT" not in out, out
    finally:
        path.unlink()


SECRET_ENV = "TRIFORGE_TEST_API_KEY"


@pytest.fixture
def host_process(monkeypatch) -> Iterator[subprocess.Popen]:
    """A host process of the test's user with a secret in its environment; the secret is in ours too."""
    secret = f"tok-{uuid.uuid4().hex}"
    monkeypatch.setenv(SECRET_ENV, secret)
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.5"
    p = subprocess.Popen(["sleep", marker], env={**os.environ, SECRET_ENV: secret})
    yield p
    p.kill()
    p.wait()


def test_no_environment_holds_a_secret(run, host_process):
    secret = os.environ[SECRET_ENV]
    code = ("import os, glob\nfor p in glob.glob('/proc/[0-9]*/environ'):\n    try:\n"
            "        print(open(p, 'rb').read())\n    except OSError as e:\n        print(p, e)\n"
            + _try("open(f'/proc/{os.getppid()}/environ', 'rb').read()")
            + _try(f"open('/proc/{host_process.pid}/environ', 'rb').read()"))
    out = run(code).output
    assert secret not in out and "GOT b'" in out, out  # the parent's environment is readable, and scrubbed


def test_host_processes_are_invisible_and_out_of_reach(run, host_process):
    marker = host_process.args[1]
    code = ("import os, signal\nfound = []\nfor pid in os.listdir('/proc'):\n    if pid.isdigit():\n        try:\n"
            "            found.append(open(f'/proc/{pid}/cmdline', 'rb').read())\n        except OSError:\n"
            "            pass\nprint('SEEN' if any(b'" + marker + "' in c for c in found) else 'UNSEEN')\n"
            + _try(f"os.kill({host_process.pid}, signal.SIGTERM)"))
    out = run(code).output
    assert "UNSEEN" in out and host_process.poll() is None, out


def test_own_processes_can_be_signalled(run):
    code = ("import subprocess, signal\np = subprocess.Popen(['sleep', '30'])\np.send_signal(signal.SIGTERM)\n"
            "print('CODE', p.wait())")
    assert f"CODE {-signal.SIGTERM}" in run(code).output


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to an unprivileged user needs root")
def test_the_same_attempts_fail_as_an_unprivileged_user(tmp_path):
    """The whole file again as `nobody` (user namespaces instead of root's namespaces and cgroups)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1]))
    import unprivileged

    try:
        done = unprivileged.run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", __file__],
                                timeout=600, capture_output=True, text=True, cwd=Path(__file__).parents[2])
    except RuntimeError as exc:
        pytest.skip(str(exc))
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and "skipped" in tail, tail  # this test skips itself there: it ran as non-root
