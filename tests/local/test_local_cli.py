"""`triforge local` as a user runs it: one-line errors with the fix, status and stop with nothing running."""

from __future__ import annotations

import os
import subprocess
import sys


def triforge(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "triforge.cli.app", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ})


def test_status_and_stop_with_nothing_installed_or_running():
    r = triforge("local", "status")
    assert r.returncode == 0, r.stderr
    assert "not installed" in r.stdout and "none running" in r.stdout
    r = triforge("local", "stop")
    assert r.returncode == 0 and "no local server running" in r.stdout


def test_serve_without_a_model_is_one_line_with_the_fix():
    r = triforge("local", "serve")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "triforge local install" in r.stderr and "Traceback" not in r.stderr


def test_chat_with_local_when_not_installed_is_one_line():
    r = triforge("llm", "chat", "-m", "local", "hi")
    assert r.returncode == 2 and "the local model is not installed" in r.stderr and "Traceback" not in r.stderr


def test_install_model_path_must_be_gguf(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_text("not a model")
    r = triforge("local", "install", "--model-path", str(bad), "--skip-server")
    assert r.returncode == 2 and "is not a GGUF file" in r.stderr
    assert r.stderr.count("\n") == 1 and r.stdout == ""  # the error alone, no progress line before it
    good = tmp_path / "y.gguf"
    good.write_bytes(b"GGUF\x03\x00\x00\x00")
    r = triforge("local", "install", "--model-path", str(good), "--skip-server")
    assert r.returncode == 0, r.stderr
    r = triforge("local", "status")
    assert str(good) in r.stdout.replace("\n", "")
