"""llama-cpp-python is built from source with this machine's flags whatever pip cached, and heals a crash."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from triforge.local import llama_build as lb
from triforge.local.llama_build import LlamaCrashed, pip_install_command, prepare_server

SETUP = (
    "import os\n"
    "from setuptools import setup\n"
    "open('probe_mod.py', 'w').write('BUILD = %r\\n' % os.environ.get('PROBE_BUILD', '?'))\n"
    "setup(name='probe-pkg', version='1.0', py_modules=['probe_mod'])\n"
)


def _sdist(index: Path) -> None:
    """A tiny sdist whose installed module records which build made it (PROBE_BUILD at build time)."""
    src = index / "probe_pkg-1.0"
    src.mkdir(parents=True)
    (src / "setup.py").write_text(SETUP)
    (src / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: probe-pkg\nVersion: 1.0\n")
    with tarfile.open(index / "probe_pkg-1.0.tar.gz", "w:gz") as t:
        t.add(src, arcname="probe_pkg-1.0")


def _pip(cmd: list[str], index: Path, target: Path, build: str, cache: Path) -> str:
    """Run a pip install command offline into `target`; returns the BUILD the installed module holds."""
    *head, requirement = cmd
    full = [*head, "--no-index", "--find-links", str(index), "--no-build-isolation", "--target", str(target),
            "--quiet", requirement]
    env = {**os.environ, "PROBE_BUILD": build, "PIP_CACHE_DIR": str(cache)}
    env.pop("PIP_NO_CACHE_DIR", None)
    subprocess.run(full, check=True, env=env, capture_output=True, timeout=240)
    return (target / "probe_mod.py").read_text().split("'")[1]


def test_install_command_builds_from_source_even_with_a_cached_wheel(tmp_path):
    """A user who built the package before has a wheel in pip's cache: plain pip reuses it, ours rebuilds."""
    index, cache = tmp_path / "index", tmp_path / "pip-cache"
    _sdist(index)
    plain = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "probe-pkg"]
    assert _pip(plain, index, tmp_path / "t1", "elsewhere", cache) == "elsewhere"
    # pip 23.1 and later serve the wheel they built before (23.0, Debian 12's venv pip, builds again)
    if _pip(plain, index, tmp_path / "t2", "here", cache) == "elsewhere":
        no_binary_only = [*plain[:-1], "--no-binary=probe-pkg", "probe-pkg"]
        assert _pip(no_binary_only, index, tmp_path / "t2b", "here", cache) == "elsewhere"  # --no-binary: not enough
    ours = pip_install_command("probe-pkg")
    assert _pip(ours, index, tmp_path / "t3", "here", cache) == "here"  # built again, with this build's env
    assert "--no-binary=probe-pkg" in ours and "--force-reinstall" not in ours
    assert pip_install_command(force=True)[-3:] == ["--force-reinstall", "--no-deps", lb.LLAMA_REQUIREMENT]


def _fake_python(tmp_path: Path, crash_until: Path | None) -> str:
    """A stand-in for the interpreter running the self-check: it segfaults until `crash_until` exists."""
    p = tmp_path / "python"
    crash = f"[ -e {crash_until} ] || kill -SEGV $$\n" if crash_until else "kill -SEGV $$\n"
    p.write_text("#!/bin/sh\n" + crash + "echo SELF-CHECK-OK \"'x'\"\n")
    p.chmod(0o755)
    return str(p)


@pytest.fixture
def model(tmp_path, monkeypatch):
    monkeypatch.setattr(lb, "missing_llama_modules", lambda: [])  # a (crashing) build is installed
    m = tmp_path / "m.gguf"
    m.write_bytes(b"GGUF")
    return m


def test_a_crashing_build_is_rebuilt_once_and_the_run_goes_on(tmp_path, model):
    rebuilt = tmp_path / "rebuilt"
    builds: list[list[str]] = []

    def pip(cmd: list[str], log: Path) -> int:
        builds.append(cmd)
        rebuilt.touch()
        return 0

    said: list[str] = []
    check = prepare_server(model, runner=pip, log=tmp_path / "build.log", say=said.append,
                           python=_fake_python(tmp_path, rebuilt))
    assert check.healed_after_signal == 11 and check.built and check.check_s > 0
    assert len(builds) == 1 and "--force-reinstall" in builds[0] and "--no-cache-dir" in builds[0]
    assert "crashed (signal 11)" in said[0] and "rebuilding" in said[0] and "passes" in said[1]


def test_a_build_that_still_crashes_is_reported_not_rebuilt_again(tmp_path, model):
    builds: list[list[str]] = []
    with pytest.raises(LlamaCrashed, match=r"signal 11"):
        prepare_server(model, runner=lambda cmd, log: builds.append(cmd) or 0, log=tmp_path / "build.log",
                       python=_fake_python(tmp_path, None))
    assert len(builds) == 1


def test_a_working_build_is_neither_rebuilt_nor_mentioned(tmp_path, model):
    said: list[str] = []
    check = prepare_server(model, runner=lambda cmd, log: pytest.fail("no build expected"), say=said.append,
                           python=_fake_python(tmp_path, tmp_path))
    assert check.healed_after_signal is None and not check.built and said == []


def test_the_build_reports_how_far_the_compiler_got(tmp_path):
    """The build runs for minutes: its log's `[n/N]` steps reach the progress line while it runs."""
    seen: list[tuple[str, float, float]] = []
    script = "echo '[3/10] Building C object ggml.o'; sleep 1.6; echo '[10/10] Linking libllama.so'; sleep 1.6"
    rc = lb._run_logged(["sh", "-c", script], tmp_path / "build.log", lambda *a: seen.append(a))
    assert rc == 0 and ("llama-cpp-python", 3, 10) in seen and seen[-1] == ("llama-cpp-python", 10, 10)
    assert (tmp_path / "build.log").read_text().startswith("triforge: sh -c")
    assert lb.build_step(tmp_path / "absent.log") == (0, 0)
    (tmp_path / "make.log").write_text("[  4%] Building C object\n[ 37%] Building CXX object llama.o\n")
    assert lb.build_step(tmp_path / "make.log") == (37, 100)
