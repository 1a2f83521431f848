"""The astra worker runs under the isolation launcher (no GPU needed): what a job inside it can reach,
judged on the host; its memory bound; a compile bomb outside the worker; the refusal where nothing isolates.

Each attempt has an honest twin that must keep working: its own folder, the NVRTC cache, a task file's folder.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path

import pytest

from triforge.astra import compile as comp
from triforge.astra.worker import Worker
from triforge.confine import isolation
from triforge.confine.isolation import IsolationPolicy, IsolationUnavailable

HANDLER = "astra.test_worker_isolation.attempt"


def attempt(job: dict) -> dict:
    """Runs inside the worker: tries what the job names and reports what it got (or the error)."""
    out: dict = {"verdict": "correct", "net_ns": os.readlink("/proc/self/ns/net"), "env": sorted(os.environ)}
    for key, path in job.get("read", {}).items():
        try:
            out[key] = Path(path).read_text()
        except OSError as exc:
            out[key] = f"error: {exc.strerror}"
    for key, path in job.get("write", {}).items():
        try:
            Path(path).write_text("written by the worker")
            out[key] = "written"
        except OSError as exc:
            out[key] = f"error: {exc.strerror}"
    for key, port in job.get("connect", {}).items():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            out[key] = "connected"
        except OSError as exc:
            out[key] = f"error: {exc.strerror or exc}"
    if job.get("allocate_mb"):
        block = bytearray(job["allocate_mb"] << 20)
        block[::4096] = b"x" * len(block[::4096])  # touch every page
        out["allocated"] = len(block)
    if job.get("noise"):  # what a library or a kernel's printf writes must never be read as a reply
        print("noise on stdout", flush=True)
        os.write(1, b"\x00\x00\x00\x10raw bytes on fd 1")
    return out


@pytest.fixture()
def worker():
    w = Worker(timeout=60, handler=HANDLER)
    yield w
    w.stop()


@pytest.fixture()
def secret_in_home():
    path = Path.home() / f".triforge-astra-secret-{uuid.uuid4().hex[:8]}"
    path.write_text("SECRET-TOKEN-7c1e")
    path.chmod(0o600)
    yield path
    path.unlink(missing_ok=True)


def test_a_job_reaches_no_network_no_home_no_host_tmp(worker, secret_in_home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-the-worker")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    host_tmp = Path("/tmp") / f"triforge-astra-escape-{uuid.uuid4().hex[:8]}"
    home_file = Path.home() / f".triforge-astra-escape-{uuid.uuid4().hex[:8]}"
    try:
        res = worker.call({"kind": "attempt", "read": {"secret": str(secret_in_home)},
                           "write": {"tmp": str(host_tmp), "home": str(home_file), "own": "own-file"},
                           "connect": {"loopback": listener.getsockname()[1]}})
        with pytest.raises(BlockingIOError):
            listener.accept()  # the host's listener saw no connection
    finally:
        listener.close()
    assert res["verdict"] == "correct", res
    assert res["net_ns"] != os.readlink("/proc/self/ns/net")
    assert "SECRET-TOKEN" not in json.dumps(res) and res["secret"].startswith("error")
    assert res["loopback"].startswith("error")
    assert res["tmp"] == "written" and not host_tmp.exists()  # written in the worker's private /tmp only
    assert not home_file.exists()  # (as an ordinary user whose home is under /tmp, it lands in the private /tmp)
    assert res["own"] == "written"  # its own folder is writable
    assert "OPENAI_API_KEY" not in res["env"] and "TRIFORGE_ASTRA_CACHE" in res["env"]
    assert "private /tmp" in worker.isolation and "home hidden" in worker.isolation


def test_the_nvrtc_cache_is_handed_in_writable(worker, tmp_path, monkeypatch):
    cache = tmp_path / "nvrtc-cache"
    monkeypatch.setenv("TRIFORGE_ASTRA_CACHE", str(cache))
    res = worker.call({"kind": "attempt", "write": {"cache": str(cache / "entry")}})
    assert res["cache"] == "written" and (cache / "entry").read_text() == "written by the worker"


def test_a_task_files_folder_is_readable_only_once_a_job_names_it(worker, tmp_path):
    folder = tmp_path / "user-task"  # under the host's /tmp: hidden from the worker unless handed in
    folder.mkdir()
    (folder / "task.py").write_text("TASK = None\n")
    before = worker.call({"kind": "attempt", "read": {"task": str(folder / "task.py")}})
    assert before["task"].startswith("error")
    after = worker.call({"kind": "attempt", "task_file": str(folder / "task.py"),
                         "read": {"task": str(folder / "task.py")}, "write": {"beside": str(folder / "x")}})
    assert after["task"] == "TASK = None\n"
    assert after["beside"].startswith("error") and not (folder / "x").exists()  # read-only


def test_output_on_the_workers_stdout_never_breaks_a_reply(worker):
    res = worker.call({"kind": "attempt", "noise": True})
    assert res["verdict"] == "correct"
    assert worker.call({"kind": "attempt"})["verdict"] == "correct"


def test_the_workers_memory_is_bounded_and_it_is_replaced():
    w = Worker(timeout=60, handler=HANDLER, memory_mb=256)
    try:
        first = w.call({"kind": "attempt", "allocate_mb": 64})
        assert first.get("allocated") == 64 << 20  # honest work within the bound
        res = w.call({"kind": "attempt", "allocate_mb": 2048})
        assert res["verdict"] == "crash" and ("MemoryError" in " ".join(res["reasons"]) or "died" in res["reasons"][0])
        assert w.call({"kind": "attempt"})["verdict"] == "correct"
    finally:
        w.stop()


def raw_compile(job: dict) -> dict:
    """Runs inside the worker: NVRTC on the source as given, no directive guard, the raw log returned."""
    from triforge.astra.compile import _nvrtc

    nvrtc = _nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(job["source"].encode(), b"candidate.cu", 0, [], [])
    (cerr,) = nvrtc.nvrtcCompileProgram(prog, 1, [b"-std=c++17"])
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    nvrtc.nvrtcDestroyProgram(prog)
    return {"verdict": "correct", "ok": int(cerr) == 0, "log": buf.decode(errors="replace")}


def test_inside_the_worker_nvrtc_cannot_open_a_file_in_home_even_without_the_guard(secret_in_home):
    """The directive guard keeps a candidate from naming any file; this is the layer under it."""
    pytest.importorskip("cuda.bindings.nvrtc")
    with Worker(timeout=120, handler="astra.test_worker_isolation.raw_compile") as w:
        own = w.call({"source": '#include "own.h"\n__global__ void k() {}\n'})
        if own["verdict"] != "correct":
            pytest.skip(f"NVRTC cannot be loaded in the worker here: {own['reasons'][0][:200]}")
        for spelling in (f'#include "{secret_in_home}"\n', f'#define HDR "{secret_in_home}"\n#include HDR\n'):
            res = w.call({"source": spelling + "int oops = ;\n"})
            assert not res["ok"] and "SECRET-TOKEN" not in res["log"], res["log"][-500:]
            assert "cannot open source file" in res["log"], res["log"][-500:]
    secret_in_home.chmod(0o644)  # the honest twin: a header the worker may read (handed in) is included
    with Worker(timeout=120, handler="astra.test_worker_isolation.raw_compile",
                policy=IsolationPolicy(read_only=(str(secret_in_home),))) as w:
        res = w.call({"source": f'#include "{secret_in_home}"\nint oops = ;\n'})
        assert "cannot open source file" not in res["log"] and "SECRET-TOKEN" in res["log"]


BOMB = '__device__ int big[1 << 28] = {1};\nextern "C" __global__ void k(int* o) { o[0] = big[threadIdx.x]; }\n'


def test_a_compile_bomb_outside_the_worker_ends_in_its_own_bounded_process(monkeypatch):
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    try:
        nvrtc.nvrtcVersion()
    except Exception as exc:  # noqa: BLE001 - the bindings are there but not the library (this user's Python)
        pytest.skip(f"NVRTC cannot be loaded here: {type(exc).__name__}")
    import resource

    monkeypatch.setattr(comp, "COMPILE_MEMORY_MB", 512)
    monkeypatch.delenv(comp.CONFINED_ENV, raising=False)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    res = comp.nvrtc_compile(BOMB, [], use_cache=False)
    assert not res.ok and "512 MiB memory bound" in res.log
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 256 << 10  # KiB: not in this process


@pytest.mark.parametrize("spelling", [
    "__device__ int big[1 << 22] = {1};",
    "__device__ __constant__ char pad[1 << 16] = {1};\n__device__ float big[4 << 20] = {0.5f};",
    "#define N (5 << 21)\nstatic __device__ short big[N] = {7, 7};",
])
def test_a_kernel_with_megabytes_of_static_data_is_a_compile_error_not_a_cubin(spelling):
    """The 1 << 28 bomb compiled to a GiB-sized cubin in 8 GiB and 190 s before the CPU bound ended it;
    smaller ones compile fast and are refused on their output's size, with the reason."""
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    try:
        nvrtc.nvrtcVersion()
    except Exception as exc:  # noqa: BLE001 - the bindings are there but not the library (this user's Python)
        pytest.skip(f"NVRTC cannot be loaded here: {type(exc).__name__}")
    source = spelling + '\nextern "C" __global__ void k(int* o) { o[0] = (int)big[threadIdx.x]; }\n'
    res = comp.nvrtc_compile(source, [], use_cache=False)
    assert not res.ok and f"over the lab's {comp.MAX_CUBIN_BYTES >> 20} MiB bound" in res.log, res.log
    small = '__device__ int table[256] = {1, 2, 3};\nextern "C" __global__ void k(int* o) { o[0] = table[threadIdx.x]; }\n'
    assert comp.nvrtc_compile(small, [], use_cache=False).ok  # an honest lookup table still compiles


def test_refused_where_nothing_isolates_unless_turned_off(monkeypatch):
    monkeypatch.setattr(isolation, "mechanism", lambda: isolation.Mechanism("none", why_not="test: disabled"))
    w = Worker(timeout=60, handler=HANDLER)
    try:
        with pytest.raises(IsolationUnavailable, match=r"test: disabled.*--isolation none"):
            w.call({"kind": "attempt"})
    finally:
        w.stop()
    off = Worker(timeout=60, handler=HANDLER, policy=IsolationPolicy(enabled=False))
    try:
        assert off.call({"kind": "attempt"})["verdict"] == "correct" and "NOT isolated" in off.isolation
    finally:
        off.stop()


def test_a_refusal_stops_the_run_before_any_candidate_instead_of_marking_each_crash(monkeypatch, tmp_path):
    from triforge.astra.agents import evaluator
    from triforge.astra.agents.evaluator import EvalJob, GpuPool
    from triforge.astra.task import get_task

    monkeypatch.setattr(isolation, "mechanism", lambda: isolation.Mechanism("none", why_not="test: disabled"))
    with pytest.raises(IsolationUnavailable):
        GpuPool(gpus=1, timeout=60, handler=HANDLER)  # the pool is made before the first model call
    refusing = Worker(timeout=60, handler=HANDLER)  # a worker that meets the refusal only when a job comes
    try:
        with pytest.raises(IsolationUnavailable):
            evaluator.run_job(EvalJob("j1", "silu_and_mul", get_task("silu_and_mul").baseline_source()),
                              refusing, tmp_path, 60)
    finally:
        refusing.stop()


def test_the_cli_refuses_the_ptx_audit_in_one_line_where_nothing_isolates(monkeypatch, tmp_path, capsys):
    """`astra scan --task` compiles the candidate: that compile is refused, never skipped in silence."""
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    try:
        nvrtc.nvrtcVersion()
    except Exception as exc:  # noqa: BLE001 - the bindings are there but not the library (this user's Python)
        pytest.skip(f"NVRTC cannot be loaded here: {type(exc).__name__}")
    from triforge.astra.task import get_task
    from triforge.cli.app import main

    kernel = tmp_path / "k.cu"
    kernel.write_text(get_task("silu_and_mul").baseline_source() + f"// {uuid.uuid4().hex}\n")  # not cached
    monkeypatch.setattr(isolation, "mechanism", lambda: isolation.Mechanism("none", why_not="test: disabled"))
    monkeypatch.delenv("TRIFORGE_ISOLATION", raising=False)
    with pytest.raises(SystemExit) as ended:
        main(["astra", "scan", "--task", "silu_and_mul", "--kernel", str(kernel)])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "--isolation none" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 2, err  # one line (wrapped at most once by the terminal)
