"""Restrictions a reference adds that its text does not state: listed, lifted, and shown to matter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triforge.cpagent import overconstrained
from triforge.cpagent.dataset import load_problem
from triforge.cpagent.grader import grade_solutions
from triforge.cpagent.overconstrained import all_relaxations
from triforge.cpagent.refs import RefCache
from triforge.cpagent.variants import solve_variant

from .test_dataset import make


def _flip(value):
    """Booleans <-> 0/1 integers, leaf by leaf."""
    if isinstance(value, list):
        return [_flip(v) for v in value]
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    return value


def _first_to_two(value):
    if isinstance(value, list):
        return [_first_to_two(value[0]), *value[1:]]
    return 2


def test_every_entry_matches_its_reference(problems):
    entries = all_relaxations()
    assert entries, "the list is empty"
    for pid, rels in entries.items():
        assert pid in problems, pid
        p = problems[pid]
        for r in rels:
            assert r.restriction.strip(), pid
            assert bool(r.find) != bool(r.bool_or_01), f"{pid}: an entry is either code or output kinds"
            if r.find:
                for k in range(p.n_instances):
                    assert p.instance_source(k).count(r.find) == 1, (pid, k)
            assert set(r.bool_or_01) <= set(p.output_keys), pid


def test_bool_or_01_alternatives_accepted_only_when_lifted(problems, refs):
    """For each listed key, the reference's own answer written the other way (0/1 for booleans, or
    booleans for 0/1) is valid for the text: accepted as stated, rejected by the unrelaxed reference read
    with strict types (by default 0/1 reads as booleans wherever the reference prints booleans)."""
    typed = {pid: keys for pid in all_relaxations() if (keys := overconstrained.bool_or_01_keys(pid))}
    assert len(typed) == 9
    for pid, keys in typed.items():
        p, ref = problems[pid], refs[pid]
        alt = {k: (_flip(v) if k in keys else v) for k, v in ref.solution.items()}
        assert json.dumps(alt) != json.dumps(ref.solution), pid
        bad = {k: (_first_to_two(v) if k in keys else v) for k, v in ref.solution.items()}
        lifted = grade_solutions(p, [alt, bad], 0, reference=ref)
        strict = grade_solutions(p, [alt], 0, reference=ref, relax=False, strict_types=True)[0]
        assert lifted[0].correct, (pid, lifted[0].reasons)
        assert lifted[1].verdict == "incorrect", (pid, "a 2 is neither a boolean nor 0/1")
        assert strict.verdict == "incorrect" and "expected" in strict.reasons[0], pid


def test_lifting_a_model_restriction_keeps_the_reference_answer_and_optimum(problems, refs):
    code = {pid: rels for pid, rels in all_relaxations().items() if any(r.find for r in rels)}
    assert set(code) == {"mario", "broken_weights"}
    for pid in code:
        p, ref = problems[pid], refs[pid]
        assert grade_solutions(p, [ref.solution], 0, reference=ref)[0].correct, pid
        if p.is_optimization:
            better = "<" if p.objective_sense == "minimize" else ">"
            res = solve_variant(p, 0, [f"{{objective}} {better} {ref.objective}"], relax=True)
            assert res["status"] == "UNSATISFIABLE", (pid, res)  # same optimum with the restriction lifted


def test_mario_route_at_exactly_the_fuel_limit_is_legal_once_lifted(problems):
    """The lifted constraint admits a route with fuel == limit; the reference does not."""
    p = problems["mario"]
    extra = ["sum(node_fuel) == fuelLimit"]
    assert solve_variant(p, 0, extra, relax=False)["status"] == "UNSATISFIABLE"
    res = solve_variant(p, 0, extra, relax=True)
    assert res["status"] in ("FEASIBLE", "OPTIMAL"), res
    (v,) = grade_solutions(p, [res["values"]], 0, cache=RefCache(Path("/nonexistent")), run_reference=False)
    # Feasible for the problem as stated; judged only on optimality (it is not the best route).
    assert "not optimal" in " ".join(v.reasons) or v.correct


def test_a_lifted_symmetry_breaking_constraint_admits_the_alternative(tmp_path, monkeypatch):
    """End to end on a toy problem whose reference fixes a label the text leaves free."""
    make(tmp_path)
    model = tmp_path / "dataset" / "toy" / "toy.cpmpy.py"
    model.write_text(model.read_text().replace("model = Model()", "model = Model(x == lo)"))
    toml = tmp_path / "relax.toml"
    toml.write_text('[[toy]]\nfind = "model = Model(x == lo)"\nreplace = "model = Model(x >= lo)"\n'
                    'restriction = "the text says any x from lo up"\n')
    monkeypatch.setattr(overconstrained, "DATA_FILE", toml)
    p = load_problem(tmp_path, "toy")
    cache = RefCache(tmp_path / "cache")
    lifted = grade_solutions(p, [{"x": 3}, {"x": 7}, {"x": 2}], 0, cache=cache)
    assert [v.verdict for v in lifted] == ["correct", "correct", "incorrect"]
    strict = grade_solutions(p, [{"x": 7}], 0, cache=cache, relax=False)
    assert strict[0].verdict == "incorrect"


def test_a_stale_entry_is_reported_not_applied(tmp_path, monkeypatch):
    make(tmp_path)
    toml = tmp_path / "relax.toml"
    toml.write_text('[[toy]]\nfind = "no such code"\nrestriction = "stale"\n')
    monkeypatch.setattr(overconstrained, "DATA_FILE", toml)
    p = load_problem(tmp_path, "toy")
    (v,) = grade_solutions(p, [{"x": 3}], 0, cache=RefCache(tmp_path / "cache"))
    assert v.correct and any("not lifted" in n for n in v.notes)


@pytest.mark.parametrize("pid", ["csplib_044_steiner", "csplib_028_bibd"])
def test_reordered_alternatives_are_accepted(problems, refs, pid):
    """Set-like outputs: any order of the rows is the same answer (no ordering in the text)."""
    ref = refs[pid]
    key = problems[pid].output_keys[0]
    alt = {**ref.solution, key: list(reversed(ref.solution[key]))}
    assert alt != ref.solution
    assert grade_solutions(problems[pid], [alt], 0, reference=ref)[0].correct
