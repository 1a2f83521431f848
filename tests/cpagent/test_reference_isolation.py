"""Reference models come from downloaded data: the warm harness that runs them is confined like graded programs."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path

import pytest

from triforge.confine import isolation
from triforge.cpagent.refs import REF_JOBS
from triforge.cpagent.warm import WarmServer


def test_a_hostile_reference_reaches_nothing_on_the_host(tmp_path):
    planted = Path("/tmp") / f"triforge-ref-planted-{uuid.uuid4().hex[:8]}"
    secret_file = Path.home() / f".triforge-ref-secret-{uuid.uuid4().hex[:8]}"
    secret = uuid.uuid4().hex
    secret_file.write_text(secret)
    secret_file.chmod(0o600)
    source = f"""
import socket
for name, fn in [("write", lambda: open({str(planted)!r}, "w").write("x")),
                 ("read", lambda: open({str(secret_file)!r}).read()),
                 ("net", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=2))]:
    try:
        print(name, "GOT", fn())
    except Exception as e:
        print(name, "FAILED", type(e).__name__)
"""
    server = WarmServer(REF_JOBS)
    try:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            listener.settimeout(0.3)
            job, result = tmp_path / "job.json", tmp_path / "result.json"
            src = source.replace("PORT", str(listener.getsockname()[1]))
            job.write_text(json.dumps({"source": src, "model_name": "model", "budget_s": 20, "workers": 1}))
            out = server.run("ref", job, result, 30)
            assert "net FAILED" in out.stdout, out.stdout + out.stderr  # a write lands in its private /tmp
            assert secret not in out.stdout + out.stderr and not planted.exists()
            with pytest.raises(TimeoutError):
                listener.accept()
            assert "private /tmp" in server.server.isolation
    finally:
        server.close()
        secret_file.unlink()
        planted.unlink(missing_ok=True)


def test_an_honest_reference_still_runs_and_answers(tmp_path):
    source = "import cpmpy as cp\nx = cp.intvar(0, 9, name='x')\nmodel = cp.Model(x == 4)\nmodel.solve()\nprint(x.value())"
    server = WarmServer(REF_JOBS)
    try:
        job, result = tmp_path / "job.json", tmp_path / "result.json"
        job.write_text(json.dumps({"source": source, "model_name": "model", "budget_s": 20, "workers": 1}))
        out = server.run("ref", job, result, 30)
        assert out.stdout.strip() == "4" and not out.timed_out and result.is_file(), out.stderr
    finally:
        server.close()


def test_the_server_is_refused_where_nothing_isolates(monkeypatch):
    monkeypatch.delenv(isolation.ENV_VAR, raising=False)
    monkeypatch.setattr(isolation, "mechanism", lambda: isolation.Mechanism("none", why_not="test: disabled"))
    with pytest.raises(isolation.IsolationUnavailable):
        WarmServer(REF_JOBS)


def test_a_hostile_reference_run_cold_reaches_nothing_either(tmp_path):
    """Without the warm server (TRIFORGE_CPBENCH_WARM=0, or another interpreter) the harness runs under the
    same policy; it used to run as a plain subprocess with the host environment."""
    import sys

    from triforge.cpagent.program_run import run_harness

    planted = Path("/tmp") / f"triforge-ref-cold-{uuid.uuid4().hex[:8]}"
    secret_file = Path.home() / f".triforge-ref-cold-secret-{uuid.uuid4().hex[:8]}"
    secret = uuid.uuid4().hex
    secret_file.write_text(secret)
    secret_file.chmod(0o600)
    try:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            listener.settimeout(0.3)
            source = f"""
import socket
for name, fn in [("write", lambda: open({str(planted)!r}, "w").write("x")),
                 ("read", lambda: open({str(secret_file)!r}).read()),
                 ("net", lambda: socket.create_connection(("127.0.0.1", {listener.getsockname()[1]}), timeout=2))]:
    try:
        print(name, "GOT", fn())
    except Exception as e:
        print(name, "FAILED", type(e).__name__)
"""
            work = tmp_path / "work"
            work.mkdir()
            job, result = work / "job.json", work / "result.json"
            job.write_text(json.dumps({"source": source, "model_name": "model", "budget_s": 20, "workers": 1}))
            r = run_harness(sys.executable, REF_JOBS, "ref", job, result, timeout=60, workdir=work)
            text = r.stdout + r.stderr + (result.read_text() if result.is_file() else "")
            assert "net FAILED" in text, text
            assert secret not in text and not planted.exists()
            with pytest.raises(TimeoutError):
                listener.accept()
    finally:
        secret_file.unlink()
        planted.unlink(missing_ok=True)
