"""Fixtures for the CP-Bench harness tests: the data set, and every reference run once per session.

The default instance of each problem is run once (2 jobs, warm harness); every planted-fault test
reuses those outputs. cmo_2012 is left out: its reference needs 6-18 s of solving with 8 workers (120 s and
more with OR-Tools' per-core default), so its test grades without the reference (optimality proven directly).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from triforge.cpagent.dataset import Problem, load_dataset
from triforge.cpagent.refs import RefResult, run_references
from triforge.data import get

SLOW = {"cmo_2012"}  # header `# Timeout: 120`


@pytest.fixture(scope="session")
def cpbench_dir() -> Path:
    """The bundled DCP-Bench-Open (a zip in the upstream layout), as a path the CLI's --data takes."""
    return get("dcp-bench-open").path()


@pytest.fixture(scope="session")
def problems(cpbench_dir: Path) -> dict[str, Problem]:
    return {p.id: p for p in load_dataset(cpbench_dir)}


@pytest.fixture(scope="session")
def refs(problems: dict[str, Problem]) -> dict[str, RefResult]:
    """Default-instance reference results of every problem but the slow ones.

    One CP-SAT worker, so each reference prints the same solution on every run: the planted faults are
    built from these solutions, and whether a shifted or perturbed one is still valid depends on which
    solution it was (a parallel portfolio picks a different one from run to run).
    """
    fast = [replace(p, instances=p.instances[:1]) for pid, p in problems.items() if pid not in SLOW]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRIFORGE_CPBENCH_WORKERS", "1")
        return {r.problem_id: r for r in run_references(fast, jobs=2)}
