"""Reference results on disk, keyed by content: a cached result is used only when nothing that made it changed.

The key of a reference run hashes the instance's source (the reference model with the instance's data
put in), its budget and CP-SAT workers, the installed versions of CPMpy and OR-Tools, and the grading
code that runs and reads it (the harness scripts, the output reader, the runner, the budgets list) with
triforge's version. Each entry carries its key and a digest of its content: an entry whose key differs
(a changed reference, instance, solver or grader) or whose digest does not match (a truncated or altered
file) is a miss, and the reference is run again; a cache can cost a re-run, never a verdict.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import uuid
from pathlib import Path
from typing import Any

import triforge

HERE = Path(__file__).parent
# what runs a reference and reads its output: a change to any of them changes every key
GRADING_SOURCES = ("ref_jobs.py", "ref_jobs_probe.py", "ref_jobs_explain.py", "probe_reading.py", "fork_report.py",
                   "output.py", "refs.py", "ref_budgets.toml", "ref_cache.py", "program_run.py")
SOLVERS = ("cpmpy", "ortools")


def _dist_version(name: str) -> str:
    """The installed version of distribution `name`, read off its dist-info folder (no import of the package)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return "absent"
    site = Path(spec.origin).parent.parent
    prefix = f"{name}-"
    try:
        for entry in os.listdir(site):
            if entry.startswith(prefix) and entry.endswith((".dist-info", ".egg-info")):
                return entry[len(prefix):].rsplit(".", 1)[0]
    except OSError:
        pass
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return f"unknown ({spec.origin})"


@functools.cache
def environment_key() -> str:
    """Solver versions and the grading code's version, as one string (computed once per process)."""
    parts = [f"triforge {triforge.__version__}"]
    parts += [f"{name} {_dist_version(name)}" for name in SOLVERS]
    for name in GRADING_SOURCES:
        try:
            parts.append(f"{name} {hashlib.sha256((HERE / name).read_bytes()).hexdigest()}")
        except OSError:
            parts.append(f"{name} missing")
    return "\n".join(parts)


def run_key(source: str, budget_s: float, workers: int) -> str:
    """The content hash of one reference run: instance source, budget, workers, solvers, grading code."""
    text = f"{source}\n# budget {budget_s:g} s, {workers} workers\n{environment_key()}"
    return hashlib.sha256(text.encode()).hexdigest()


def _digest(key: str, result: dict[str, Any]) -> str:
    return hashlib.sha256(f"{key}\n{json.dumps(result, sort_keys=True)}".encode()).hexdigest()


class ResultStore:
    """One JSON file per (problem, instance) under `folder`; `get` returns the stored result only for `key`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, problem_id: str, instance: int) -> Path:
        return self.folder / f"{problem_id}.{instance}.json"

    def get(self, problem_id: str, instance: int, key: str) -> dict[str, Any] | None:
        try:
            entry = json.loads(self.path(problem_id, instance).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("result"), dict):
            return None
        result = entry["result"]
        if entry.get("digest") != _digest(key, result):
            return None
        if result.get("problem_id") != problem_id or result.get("instance") != instance:
            return None
        return result

    def last_duration(self, problem_id: str, instance: int) -> float | None:
        try:
            seconds = json.loads(self.path(problem_id, instance).read_text(encoding="utf-8"))["result"]["duration_s"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return float(seconds) if isinstance(seconds, (int, float)) and seconds >= 0 else None

    def put(self, problem_id: str, instance: int, key: str, result: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.path(problem_id, instance)
        tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")  # concurrent writers never share one
        tmp.write_text(json.dumps({"key": key, "digest": _digest(key, result), "result": result}), encoding="utf-8")
        os.replace(tmp, final)
