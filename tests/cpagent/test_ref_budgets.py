"""Reference budgets and expectations (ref_budgets.toml): measured budgets, no-solution and beyond-reach lists."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from triforge.cli.cpagent import app
from triforge.cpagent import ref_budgets
from triforge.cpagent.ref_budgets import PolicyError, expectation, policy, ref_budget
from triforge.cpagent.refs import RefCache, RefResult, all_tasks, run_reference, run_references

runner = CliRunner()


@pytest.fixture()
def planted_policy(tmp_path, monkeypatch):
    """Point the runner at a policy file written by the test."""

    def write(text: str):
        path = tmp_path / "ref_budgets.toml"
        path.write_text(text)
        monkeypatch.setattr(ref_budgets, "DATA_FILE", path)
        return path

    return write


def test_shipped_policy_loads_and_every_entry_names_a_real_problem(problems):
    data = ref_budgets._load(ref_budgets.DATA_FILE)
    assert data, "the shipped policy is empty"
    for pid, pol in data.items():
        assert pid in problems, f"{pid} is not a CP-Bench problem"
        n = problems[pid].n_instances
        assert all(0 <= k < n for k in (*pol.no_solution, *pol.beyond_reach, *pol.marginal, *pol.instance_budget_s)), pid
        assert pol.why


def test_a_listed_no_solution_instance_passes_only_with_a_proof(problems):
    p = problems["csplib_009_perfect_square_placement"]
    assert expectation(p.id, 2) == "no_solution"
    r = run_reference(p, 2)
    assert r.status == "UNSATISFIABLE" and not r.ok and r.as_expected
    assert "no solution exists" in r.reason


def test_a_wrong_no_solution_listing_is_caught(problems, planted_policy):
    planted_policy('[csplib_054_n_queens]\nno_solution = [0]\nwhy = "planted: instance 0 has solutions"\n')
    r = run_reference(problems["csplib_054_n_queens"], 0)
    assert r.ok and not r.as_expected
    assert "listed as having no solution, but the reference found one" in r.reason


def test_beyond_reach_instances_are_skipped_unless_asked(problems, planted_policy, cpbench_dir, tmp_path,
                                                        monkeypatch):
    monkeypatch.setenv("TRIFORGE_HOME", str(tmp_path / "home"))
    planted_policy('[csplib_054_n_queens]\nbeyond_reach = [1]\nwhy = "planted"\n')
    q = problems["csplib_054_n_queens"]
    assert len(all_tasks([q])) == q.n_instances
    assert (q, 1) not in all_tasks([q], beyond_reach=False)
    assert {r.instance for r in run_references([q], jobs=2)} == set(range(q.n_instances)) - {1}
    out = tmp_path / "refs.json"
    res = runner.invoke(app, ["refs", "--data", str(cpbench_dir), "--problem", q.id, "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "1 instance(s) listed as beyond reach were not run" in res.output
    assert json.loads(out.read_text())["skipped_beyond_reach"] == 1
    res = runner.invoke(app, ["refs", "--data", str(cpbench_dir), "--problem", q.id, "--include-beyond-reach"])
    assert res.exit_code == 0 and f"{q.n_instances}/{q.n_instances} reference runs as expected" in res.output


def test_a_measured_budget_replaces_the_header_and_bounds_the_run(problems, planted_policy):
    planted_policy('[csplib_001_car_sequencing]\nbudget_s = 30\ninstance_budget_s = {1 = 1.5}\nwhy = "planted"\n')
    p = problems["csplib_001_car_sequencing"]
    assert ref_budget(p, 0) == 30 and ref_budget(p, 1) == 1.5
    r = run_reference(p, 1)
    assert not r.ok and r.status == "timeout" and r.duration_s < 5
    assert "1.5 s" in r.reason


def test_an_optimisation_reference_stopped_by_its_budget_still_prints_its_best_solution(problems, planted_policy):
    # template design's instance 1 is not proven optimal in minutes; with 6 s the solver stops itself at ~5 s
    # and the reference prints the best solution found, instead of being killed with nothing.
    planted_policy('[csplib_002_template_design]\ninstance_budget_s = {1 = 6}\nwhy = "planted"\n')
    p = problems["csplib_002_template_design"]
    r = run_reference(p, 1)
    assert r.ok and r.status == "FEASIBLE" and not r.proven_optimal and r.objective is not None
    assert r.duration_s < 6.5


def test_the_cache_is_keyed_on_the_budget_too(problems, planted_policy, tmp_path):
    cache = RefCache(tmp_path / "c")
    q = problems["csplib_054_n_queens"]
    cache.put(run_reference(q, 0))
    assert cache.get(q, 0) is not None
    planted_policy('[csplib_054_n_queens]\nbudget_s = 7\nwhy = "planted"\n')
    assert cache.get(q, 0) is None  # a run under another budget is another result


@pytest.mark.parametrize("text", ["[x]\nbudget_s = 3\n", "[x]\nbudget = 3\nwhy = 'typo'\n", "[x\n"])
def test_a_malformed_policy_file_is_a_clear_error(planted_policy, text):
    path = planted_policy(text)
    with pytest.raises(PolicyError, match=str(path)):
        policy("x")


def test_a_marginal_instance_may_run_out_of_time_but_nothing_else(problems, planted_policy, cpbench_dir, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv("TRIFORGE_HOME", str(tmp_path / "home"))
    p = problems["csplib_001_car_sequencing"]
    others = ", ".join(str(k) for k in range(p.n_instances) if k != 1)
    planted_policy(f'[{p.id}]\nmarginal = [1]\nbeyond_reach = [{others}]\ninstance_budget_s = {{1 = 1.5}}\n'
                   'why = "planted"\n')
    assert expectation(p.id, 1) == "marginal"
    out = tmp_path / "refs.json"
    res = runner.invoke(app, ["refs", "--data", str(cpbench_dir), "--problem", p.id, "--json", str(out)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())  # rich wraps long lines at the test console's width
    assert "1/1 reference runs as expected" in text and "1 listed as marginal ran out of time" in text, text
    (r,) = [RefResult.from_json(d) for d in json.loads(out.read_text())["results"]]
    assert r.status == "timeout" and not r.ok and r.as_expected and "allowed: listed as marginal" in r.reason
    # a marginal instance that crashes or prints a bad solution still fails the run
    for status in ("error", "bad_output", "UNKNOWN"):
        assert not RefResult(p.id, 1, False, status, None, None, 1.0, "", "", "marginal").as_expected
    assert not RefResult(p.id, 1, False, "timeout", None, None, 1.0, "", "", "").as_expected


def test_an_instance_cannot_be_marginal_and_beyond_reach(planted_policy):
    path = planted_policy('[x]\nmarginal = [3]\nbeyond_reach = [3]\nwhy = "planted"\n')
    with pytest.raises(PolicyError, match="marginal and in another list"):
        policy("x", path)
