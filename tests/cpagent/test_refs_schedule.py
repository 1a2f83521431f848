"""`refs` scheduling: unchanged references come from the cache, the rest run longest first, the report names
what took the time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from triforge.cpagent import refs
from triforge.cpagent.refs import RefCache, RefResult, dominating, recorded_seconds, run_references


@pytest.fixture()
def calls(monkeypatch):
    """The (problem, instance) of every reference really run, in the order they started."""
    seen: list[tuple[str, int]] = []
    real = refs.run_reference

    def run(problem, instance=0, **kw):
        seen.append((problem.id, instance))
        return real(problem, instance, **kw)

    monkeypatch.setattr(refs, "run_reference", run)
    return seen


def test_a_second_run_takes_unchanged_references_from_the_cache(problems, calls, tmp_path):
    queens = problems["csplib_054_n_queens"]
    cache = RefCache(tmp_path / "c")
    first = run_references([queens], jobs=2, cache=cache)
    assert len(calls) == queens.n_instances and all(r.ok and not r.cached for r in first)
    second = run_references([queens], jobs=2, cache=cache)
    assert len(calls) == queens.n_instances  # nothing ran again
    assert all(r.cached for r in second)
    assert [(r.problem_id, r.instance, r.status, r.solution) for r in second] == \
        [(r.problem_id, r.instance, r.status, r.solution) for r in first]
    changed = replace(queens, reference_source=queens.reference_source + "\n# changed\n")
    third = run_references([changed], jobs=2, cache=cache)
    assert len(calls) == 2 * queens.n_instances and not any(r.cached for r in third)
    run_references([queens], jobs=2, cache=cache, reuse=False)
    assert len(calls) == 3 * queens.n_instances


def test_runs_start_longest_first(problems, monkeypatch, tmp_path):
    cars = problems["csplib_001_car_sequencing"]
    started: list[int] = []

    def fake(problem, instance=0, **kw):
        started.append(instance)
        return RefResult(problem.id, instance, True, "FEASIBLE", {}, None, 0.01)

    monkeypatch.setattr(refs, "run_reference", fake)
    run_references([cars], jobs=1)
    expected = [recorded_seconds(cars, k) for k in started]
    assert expected == sorted(expected, reverse=True) and expected[0] > 60, expected[:5]
    # what ran here last time, whatever its result, takes the place of the recorded durations
    cache = RefCache(tmp_path / "c")
    last = cars.n_instances - 1
    if refs.expectation(cars.id, last) == "beyond_reach":
        last = next(k for k in reversed(range(cars.n_instances)) if refs.expectation(cars.id, k) != "beyond_reach")
    cache._store.put(cars.id, last, "old-key", {**RefResult(cars.id, last, True, "FEASIBLE", {}, None, 999.0)
                                                 .to_json()})
    started.clear()
    run_references([cars], jobs=1, cache=cache)
    assert started[0] == last


def test_the_report_names_the_runs_that_took_the_time():
    rs = [RefResult("a", 0, True, "OPTIMAL", {}, 1, 50.0), RefResult("b", 3, False, "timeout", None, None, 120.0),
          RefResult("c", 0, True, "FEASIBLE", {}, None, 10.0), RefResult("d", 0, True, "OPTIMAL", {}, 1, 900.0,
                                                                           cached=True)]
    line = dominating(rs, n=2)
    assert line.startswith("the 2 longest of 3 runs took 94% of their 180 s")
    assert "b#3 120 s (timeout), a#0 50 s (OPTIMAL)" in line and "d#0" not in line
    assert dominating([RefResult("d", 0, True, "OPTIMAL", {}, 1, 9.0, cached=True)]) == ""
