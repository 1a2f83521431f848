"""The grader on problems nobody tuned it to: a corpus of our own in the DCP-Bench-Open layout (corpus/dataset/).

Their references print the solution in the many ways CPMpy code does (objective casts, numpy conversions,
comprehensions, helper functions, dicts built over several statements, values derived from several variables,
solver objects, data blocks with derived values, two data blocks). For every instance the reference's own output
must be accepted, and planted wrong answers rejected as `incorrect` (never `error`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from triforge.cpagent.dataset import Problem, load_dataset
from triforge.cpagent.grader import Verdict, grade_output, grade_solutions
from triforge.cpagent.refs import RefCache, RefResult, run_references
from triforge.cpagent.variants import printed_suboptimal

CORPUS = Path(__file__).with_name("corpus")


@pytest.fixture(scope="module")
def corpus() -> list[Problem]:
    return load_dataset(CORPUS)


@pytest.fixture(scope="module")
def corpus_refs(corpus, tmp_path_factory) -> tuple[dict[tuple[str, int], RefResult], RefCache]:
    cache = RefCache(tmp_path_factory.mktemp("corpus-refs"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRIFORGE_CPBENCH_WORKERS", "1")
        results = run_references(corpus, jobs=2, cache=cache)
    return {(r.problem_id, r.instance): r for r in results}, cache


def _paths(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _paths(v, (*path, k))]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _paths(v, (*path, i))]
    return [(path, value)]


def _replace(sol: dict[str, Any], path: tuple, new: Any) -> dict[str, Any]:
    out = copy.deepcopy(sol)
    target: Any = out
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = new
    return out


def planted(sol: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Wrong answers built from a valid one: keys, types, and one value changed."""
    keys = list(sol)
    leaves = _paths(sol)
    out: dict[str, dict[str, Any]] = {
        "empty": {},
        "missing_key": {k: sol[k] for k in keys[:-1]},
        "extra_key": {**sol, "note": 1},
    }
    path, leaf = leaves[0]
    if isinstance(leaf, bool):
        out["perturbed"] = _replace(sol, path, not leaf)
        out["bool_as_string"] = _replace(sol, path, str(leaf).lower())
        out["bool_as_2"] = _replace(sol, path, 2)
    else:
        out["perturbed"] = _replace(sol, path, leaf + 1)
        out["out_of_range"] = _replace(sol, path, leaf + 1000)
        out["number_as_string"] = _replace(sol, path, str(leaf))
        if isinstance(leaf, int):
            out["int_as_float"] = _replace(sol, path, leaf + 0.5)
    if (lists := [k for k in keys if isinstance(sol[k], list) and sol[k]]):
        out["list_too_short"] = {**sol, lists[0]: sol[lists[0]][:-1]}
    return out


def _grade_instance(problem: Problem, k: int, ref: RefResult, cache: RefCache) -> dict[str, Verdict]:
    sol = ref.solution
    assert sol is not None
    cands = {"reference": sol, **planted(sol)}
    if problem.is_optimization:
        text = printed_suboptimal(problem, k, worse_than=ref.objective)
        assert text, f"{problem.id}#{k}: no sub-optimal solution printed"
        cands["suboptimal"] = json.loads(text)
    verdicts = dict(zip(cands, grade_solutions(problem, list(cands.values()), k, reference=ref, cache=cache),
                        strict=True))
    verdicts["prose_around"] = grade_output(problem, f"The answer is:\n{json.dumps(sol)}\n", k, reference=ref,
                                            cache=cache)
    return verdicts


@pytest.fixture(scope="module")
def corpus_verdicts(corpus, corpus_refs) -> dict[str, dict[str, Verdict]]:
    refs, cache = corpus_refs
    out = {}
    for p in corpus:
        for k in range(p.n_instances):
            ref = refs[(p.id, k)]
            assert ref.ok, f"{p.id}#{k}: reference failed: {ref.status} {ref.reason}"
            out[f"{p.id}#{k}"] = _grade_instance(p, k, ref, cache)
    return out


def test_the_corpus_is_large_and_varied(corpus):
    assert len(corpus) >= 30
    assert sum(p.is_optimization for p in corpus) >= 12
    assert sum(not p.is_optimization for p in corpus) >= 12
    assert sum(p.n_instances > 1 for p in corpus) >= 10


def test_every_reference_output_is_accepted(corpus_verdicts):
    bad = [f"{i}: {v['reference'].verdict} {v['reference'].reasons}" for i, v in corpus_verdicts.items()
           if not v["reference"].correct]
    assert not bad, "\n".join(bad)


def test_every_planted_wrong_answer_is_incorrect(corpus_verdicts):
    bad = [f"{i} {name}: {v.verdict} {v.reasons[:1]}" for i, vs in corpus_verdicts.items() for name, v in vs.items()
           if name != "reference" and v.verdict != "incorrect"]
    assert not bad, "\n".join(bad)
    kinds = {name for vs in corpus_verdicts.values() for name in vs}
    assert {"empty", "missing_key", "extra_key", "perturbed", "number_as_string", "suboptimal", "prose_around",
            "bool_as_2"} <= kinds


def test_suboptimal_answers_are_refused_as_not_optimal(corpus_verdicts):
    subs = {i: vs["suboptimal"] for i, vs in corpus_verdicts.items() if "suboptimal" in vs}
    assert len(subs) >= 15
    bad = [f"{i}: {v.reasons}" for i, v in subs.items() if not v.reasons or "not optimal" not in v.reasons[0]]
    assert not bad, "\n".join(bad)


def test_booleans_printed_as_0_1_are_read_as_booleans_unless_strict(corpus, corpus_refs):
    """Where the reference prints booleans, 0/1 is accepted with a note; --strict-types refuses it; a wrong
    0/1 value is still wrong, and 2 is no boolean."""
    refs, cache = corpus_refs
    p = next(p for p in corpus if p.id == "c13_lamps_bool_list")
    ref = refs[(p.id, 0)]
    as01 = {"on": [int(b) for b in ref.solution["on"]]}
    wrong = {"on": [1 - b for b in as01["on"]]}
    lenient = grade_solutions(p, [as01, wrong, {"on": [2, *as01["on"][1:]]}], 0, reference=ref, cache=cache)
    assert lenient[0].correct and any("0/1 read as booleans" in n for n in lenient[0].notes), lenient[0]
    assert [v.verdict for v in lenient[1:]] == ["incorrect", "incorrect"]
    strict = grade_solutions(p, [as01], 0, reference=ref, cache=cache, strict_types=True)[0]
    assert strict.verdict == "incorrect" and "expected boolean" in strict.reasons[0]


def test_a_violation_names_the_first_violated_constraint(corpus, corpus_refs):
    refs, cache = corpus_refs
    p = next(p for p in corpus if p.id == "c01_pair_objective_cast")
    v = grade_solutions(p, [{"x": 3, "y": 6, "best": 10}], 0, reference=refs[(p.id, 0)], cache=cache)[0]
    assert v.verdict == "incorrect"
    line = p.reference_source.splitlines().index("model = cp.Model(x + y == 10, x < y)") + 1
    assert (f"first violated is constraint 1 of 2 (added at line {line} of the reference: "
            "`model = cp.Model(x + y == 10, x < y)`)") in v.reasons[0], v.reasons


# Valid answers other than the one the reference printed (checked by hand against each problem's text).
ALTERNATIVES = [
    ("c02_grid_coloring_astype", 0, {"grid": [[0, 2, 1], [1, 0, 2]]}),
    ("c05_queens_helper", 0, {"queens": [1, 3, 5, 0, 2, 4]}),
    ("c10_bin_packing_main", 0, {"bins": [0, 1, 0, 1, 1], "n_bins": 2}),  # 4+3 | 3+2+2
    ("c03_knapsack_bools", 0, {"take": [True, True, True, False], "value": 15}),  # 3+4+5 = 12, 4+5+6 = 15
    ("c03_knapsack_bools", 0, {"take": [1, 0, 0, 1], "value": 15}),  # 0/1 for the booleans
    ("c26_selected_indices", 0, {"items": [0, 1], "value": 7}),
]


def test_valid_alternatives_are_accepted(corpus, corpus_refs):
    refs, cache = corpus_refs
    by_id = {p.id: p for p in corpus}
    bad = []
    for pid, k, sol in ALTERNATIVES:
        v = grade_solutions(by_id[pid], [sol], k, reference=refs[(pid, k)], cache=cache)[0]
        if not v.correct:
            bad.append(f"{pid}#{k} {sol}: {v.verdict} {v.reasons}")
    assert not bad, "\n".join(bad)


def test_positions_lists_must_be_increasing_positions(corpus, corpus_refs):
    """A list printed as the positions where an array is true: reordered, repeated or out-of-range positions
    can never be printed, and a different valid set of positions is judged on its meaning."""
    refs, cache = corpus_refs
    p = next(p for p in corpus if p.id == "c26_selected_indices")
    ref = refs[(p.id, 1)]  # w [1, 4, 3, 2], v [2, 9, 4, 1], cap 6: items 0 and 1 (value 11) is the optimum
    cands = [{"items": [1, 0], "value": 11}, {"items": [0, 0, 1], "value": 11}, {"items": [0, 4], "value": 11},
             {"items": [1, 3], "value": 10}, {"items": [0, 1, 3], "value": 12}]
    v = grade_solutions(p, cands, 1, reference=ref, cache=cache)
    assert [x.verdict for x in v] == ["incorrect"] * 5, [(x.verdict, x.reasons) for x in v]
    assert "increasing positions" in v[0].reasons[0] and "not optimal" in v[3].reasons[0]


UNREADABLE = {
    # A string built from several variables: no single expression explains it.
    "u_route_string": ('"""Visit 0..3 in the order a permutation fixes: start 0, then 2, then 1, then 3."""\n'
                       "import json\n\nimport cpmpy as cp\n\n"
                       'order = cp.intvar(0, 3, shape=4, name="order")\n'
                       "model = cp.Model(cp.AllDifferent(order), order[0] == 0, order[1] == 2, order[2] == 1)\n"
                       "model.solve()\n"
                       'print(json.dumps({"route": "->".join(str(v) for v in order.value())}))\n'),
    # Output code that fails on almost every value of the variable's domain.
    "u_fragile_lookup": ('"""Pick the first of two names."""\nimport json\n\nimport cpmpy as cp\n\n'
                         'names = ["ann", "bob"]\nx = cp.intvar(0, 999, name="x")\n'
                         "model = cp.Model(x == 0)\nmodel.solve()\n"
                         'print(json.dumps({"name": names[x.value()]}))\n'),
}


def test_a_reference_that_cannot_be_read_gives_error_never_incorrect(tmp_path):
    for pid, body in UNREADABLE.items():
        folder = tmp_path / "dataset" / pid
        folder.mkdir(parents=True)
        (folder / f"{pid}.cpmpy.py").write_text("# Category: test\n" + body)
        (folder / f"{pid}.json").write_text("[]")
    probs = {p.id: p for p in load_dataset(tmp_path)}
    cache = RefCache(tmp_path / "cache")
    route = probs["u_route_string"]
    right, wrong = grade_solutions(route, [{"route": "0->2->1->3"}, {"route": "0->1->2->3"}], 0, cache=cache)
    assert right.correct, right.reasons
    assert wrong.verdict == "error" and "cannot tell which model expression" in wrong.reasons[0], wrong.reasons
    (v,) = grade_solutions(probs["u_fragile_lookup"], [{"name": "bob"}], 0, cache=cache)
    assert v.verdict == "error" and "could not be read" in v.reasons[0] and "IndexError" in v.reasons[0], v.reasons
