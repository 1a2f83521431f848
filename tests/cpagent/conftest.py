"""Fixtures for the CP-Bench harness tests: the data set, and every reference run once per session.

The default instance of each problem is run once (2 jobs, warm harness); every planted-fault test
reuses those outputs. cmo_2012 is left out: its reference needs about 120 s of solving (more on a
loaded machine), so its test grades without the reference (optimality proven directly).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from triforge.cpagent.dataset import Problem, load_dataset
from triforge.cpagent.refs import RefResult, run_references

SLOW = {"cmo_2012"}  # header `# Timeout: 120`


@pytest.fixture(scope="session")
def cpbench_dir(shared_data: Path) -> Path:
    path = shared_data / "dcp-bench-open"
    if not path.is_dir():
        pytest.skip(f"CP-Bench data not found at {path}")
    return path


@pytest.fixture(scope="session")
def problems(cpbench_dir: Path) -> dict[str, Problem]:
    return {p.id: p for p in load_dataset(cpbench_dir)}


@pytest.fixture(scope="session")
def refs(problems: dict[str, Problem]) -> dict[str, RefResult]:
    """Default-instance reference results of every problem but the slow ones."""
    fast = [replace(p, instances=p.instances[:1]) for pid, p in problems.items() if pid not in SLOW]
    return {r.problem_id: r for r in run_references(fast, jobs=2)}
