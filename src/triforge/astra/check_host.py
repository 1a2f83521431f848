"""The harness side of a check: interface and static scan here, everything on the GPU in the worker."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from triforge.astra.candidate import Candidate, CandidateError, check_interface
from triforge.astra.compile import nvrtc_compile
from triforge.astra.evaluate import EvalOptions
from triforge.astra.ptx_audit import audit_ptx
from triforge.astra.scan import scan
from triforge.astra.task import get_task
from triforge.astra.worker import Worker
from triforge.confine import proc
from triforge.confine.isolation import IsolationUnavailable
from triforge.core.errors import UserError

VERDICTS = ("correct", "incorrect", "hack", "crash", "compile_error")


def require_gpu() -> None:
    """Fail with one line when this machine cannot run candidates (no torch, no CUDA, no cuda-python)."""
    try:
        import torch
    except ImportError:
        raise UserError("astra needs torch with CUDA on this machine (pip install torch)") from None
    if not torch.cuda.is_available():
        raise UserError("no CUDA GPU is visible: check and bench run candidates on an NVIDIA GPU")
    try:
        from cuda.bindings import driver, nvrtc  # noqa: F401
    except ImportError:
        raise UserError("astra compiles with NVRTC through cuda-python: pip install cuda-bindings") from None


def precheck(task_name: str, source: str) -> dict[str, Any] | None:
    """Checks that need no GPU: interface, launch lines, static anti-hack scan. None when all pass."""
    task = get_task(task_name)
    try:
        Candidate.from_source(source)
        check_interface(source, task.baseline_source(), task.entry)
    except CandidateError as exc:
        return {"verdict": "compile_error", "reasons": [str(exc)], "task": task_name}
    findings = scan(source)
    if not findings:
        findings = audit_on_cpu(task_name, source)
    if findings:
        return {"verdict": "hack", "reasons": [str(f) for f in findings], "task": task_name,
                "rules": sorted({f.rule for f in findings})}
    return None


def audit_on_cpu(task_name: str, source: str, arch: str = "sm_90") -> list:
    """Compile with NVRTC (no GPU needed) and audit the PTX; empty when NVRTC is not installed here or the
    candidate does not compile (the worker reports that)."""
    try:
        res = nvrtc_compile(source, list(get_task(task_name).name_expressions().values()), arch=arch)
    except IsolationUnavailable:  # the compile would run unconfined: refused, never skipped in silence
        raise
    except Exception:  # noqa: BLE001 - no NVRTC here (missing library or bindings): the worker audits
        return []
    return audit_ptx(res.ptx, res.log) if res.ok else []


def check(task_name: str, source: str, opts: EvalOptions, worker: Worker, timeout: float | None = None,
          sanitize: bool = False, kernel_path: str | None = None) -> dict[str, Any]:
    early = precheck(task_name, source)
    if early is not None:
        return early
    result = worker.call({"kind": "evaluate", "task": task_name, "source": source, "options": asdict(opts)}, timeout)
    result.setdefault("task", task_name)
    result.pop("fatal", None)
    if sanitize and result.get("verdict") == "correct":
        result["sanitizer"] = run_sanitizer(task_name, source, kernel_path)
        errs = [f"{t}: {r['summary']}" for t, r in result["sanitizer"].items() if not r["ok"]]
        if errs:
            result["verdict"] = "incorrect"
            result["reasons"] = [f"compute-sanitizer {e}" for e in errs]
    return result


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for base in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        p = Path(base) / "bin" / name
        if base and p.is_file():
            return str(p)
    return None


def run_sanitizer(task_name: str, source: str, kernel_path: str | None = None, timeout: float = 400,
                  tools: tuple[str, ...] = ("memcheck", "racecheck")) -> dict[str, Any]:
    """compute-sanitizer memcheck and racecheck over the fuzz shapes and the first train shape, bf16."""
    exe = _tool("compute-sanitizer")
    if exe is None:
        return {"memcheck": {"ok": False, "summary": "compute-sanitizer not found"}}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as td:
        path = kernel_path or str(Path(td) / "candidate.cu")
        if kernel_path is None:
            Path(path).write_text(source)
        for tool in tools:
            # host API errors (torch and the driver probing features) are not the candidate's
            cmd = [exe, "--tool", tool, "--error-exitcode", "97", "--print-limit", "20", "--report-api-errors", "no",
                   sys.executable, "-m",
                   "triforge.astra.runner", "check", "--task", task_name, "--kernel", path, "--shapes", "sanitize"]
            # without torch's caching allocator every tensor is its own allocation, so overruns are seen
            env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
            r = proc.run(cmd, timeout=timeout, env=env)
            text = (r.stdout + r.stderr)
            lines = [ln for ln in text.splitlines() if "ERROR SUMMARY" in ln or "RACECHECK SUMMARY" in ln]
            ok = r.returncode == 0 and not r.timed_out
            summary = lines[-1].strip("= ").strip() if lines else ("timed out" if r.timed_out else f"exit {r.returncode}")
            if not ok:
                errs = [ln.strip("= ").strip() for ln in text.splitlines()
                        if "Invalid" in ln or "Race reported" in ln or "Program hit" in ln or "is out of bounds" in ln][:3]
                summary = "; ".join([summary] + errs)
            out[tool] = {"ok": ok, "summary": summary, "seconds": round(r.duration_s, 1)}
    return out


def write_json(path: str | None, data: Any) -> None:
    if path:
        Path(path).write_text(json.dumps(data, indent=2, default=str))
