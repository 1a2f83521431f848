"""The reference cache: a second grading does not solve the reference again; a stale or corrupted entry is a
miss (the reference runs again), never a verdict.

knapsack (capacity 7) has the optimum 10 (items 2 and 3); with a capacity one less the optimum is 9 (items 0, 1, 2).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from triforge.cpagent import ref_cache, refs
from triforge.cpagent.grader import grade_solutions
from triforge.cpagent.refs import RefCache

BEST = {"x": [False, False, True, True, False]}  # value 10, weight 7
NINE = {"x": [True, True, True, False, False]}  # value 9, weight 6


@pytest.fixture()
def knapsack(problems):
    return problems["knapsack"]


@pytest.fixture()
def counted(monkeypatch):
    """How many times a reference model is really run."""
    calls: list[str] = []
    real = refs.run_reference

    def run(problem, instance=0, **kw):
        calls.append(problem.id)
        return real(problem, instance, **kw)

    monkeypatch.setattr(refs, "run_reference", run)
    return calls


def _verdict(problem, solution, cache):
    return grade_solutions(problem, [solution], 0, cache=cache)[0]


def test_a_second_grading_does_not_solve_the_reference_again(knapsack, counted, tmp_path):
    cache = RefCache(tmp_path / "c")
    assert _verdict(knapsack, BEST, cache).verdict == "correct"
    assert _verdict(knapsack, NINE, cache).verdict == "incorrect"
    assert counted == ["knapsack"]
    assert _verdict(knapsack, BEST, RefCache(tmp_path / "c")).verdict == "correct"  # another process, same files
    assert counted == ["knapsack"]


def test_a_changed_reference_file_is_solved_again(knapsack, counted, tmp_path):
    cache = RefCache(tmp_path / "c")
    assert _verdict(knapsack, NINE, cache).verdict == "incorrect"  # optimum 10 cached
    smaller = replace(knapsack, reference_source=knapsack.reference_source.replace(
        "sum(x * weights) <= capacity", "sum(x * weights) <= capacity - 1"))
    assert smaller.reference_source != knapsack.reference_source
    v = _verdict(smaller, NINE, cache)
    assert v.verdict == "correct" and v.optimum == 9, v.reasons  # the stale optimum 10 would refuse it
    assert counted == ["knapsack", "knapsack"]


def _entry(cache: RefCache):
    path = cache.folder / "knapsack.0.json"
    return path, json.loads(path.read_text())


def _tamper_objective(entry):
    entry["result"]["objective"] = 9
    return json.dumps(entry)


def _other_problem(entry):
    entry["result"]["problem_id"] = "other"
    return json.dumps(entry)


@pytest.mark.parametrize("corrupt", [
    _tamper_objective,  # a changed value: the digest no longer matches
    _other_problem,
    lambda e: json.dumps(e)[: len(json.dumps(e)) // 2],  # truncated
    lambda e: "\x00\xff garbage",
    lambda e: json.dumps({**e, "result": {"problem_id": "knapsack", "instance": 0}}),  # fields missing
    lambda e: json.dumps([e]),
], ids=["objective", "other-problem", "truncated", "garbage", "fields-missing", "not-an-object"])
def test_a_corrupted_entry_is_a_miss_never_a_verdict(knapsack, counted, tmp_path, corrupt):
    cache = RefCache(tmp_path / "c")
    assert _verdict(knapsack, BEST, cache).verdict == "correct"
    path, entry = _entry(cache)
    path.write_text(corrupt(entry))
    assert cache.get(knapsack, 0) is None
    v = _verdict(knapsack, NINE, cache)  # with the planted objective 9 taken as the optimum this would pass
    assert v.verdict == "incorrect" and "not optimal" in v.reasons[0], v.reasons
    assert counted == ["knapsack", "knapsack"]
    assert cache.get(knapsack, 0) is not None  # the fresh run replaced the bad entry


def test_new_solver_versions_or_grading_code_are_a_miss(knapsack, tmp_path, monkeypatch):
    cache = RefCache(tmp_path / "c")
    cache.put(refs.run_reference(knapsack, 0))
    assert cache.get(knapsack, 0) is not None
    monkeypatch.setattr(ref_cache, "_dist_version", lambda name: "99.0" if name == "ortools" else "1.0")
    ref_cache.environment_key.cache_clear()
    assert cache.get(knapsack, 0) is None
    monkeypatch.undo()
    ref_cache.environment_key.cache_clear()
    assert cache.get(knapsack, 0) is not None
    harness = tmp_path / "harness"
    harness.mkdir()
    for name in ref_cache.GRADING_SOURCES:
        (harness / name).write_bytes((ref_cache.HERE / name).read_bytes())
    (harness / "ref_jobs.py").write_text((ref_cache.HERE / "ref_jobs.py").read_text() + "\n# changed\n")
    monkeypatch.setattr(ref_cache, "HERE", harness)
    ref_cache.environment_key.cache_clear()
    try:
        assert cache.get(knapsack, 0) is None
    finally:
        monkeypatch.undo()
        ref_cache.environment_key.cache_clear()


def test_solver_versions_are_read_without_importing_the_solvers():
    import subprocess
    import sys

    code = ("import sys\nfrom triforge.cpagent import ref_cache\nkey = ref_cache.environment_key()\n"
            "print('cpmpy' in sys.modules, 'ortools' in sys.modules)\nprint(key)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert lines[0] == "False False", out.stderr
    assert any(line.startswith("cpmpy ") and line[6:].strip()[0].isdigit() for line in lines[1:]), lines
    assert any(line.startswith("ortools ") and line[8:].strip()[0].isdigit() for line in lines[1:]), lines
