"""maestro on the simulated bed: it repairs the planted structural defects that config-only cannot, and the
run is reproducible (byte-identical log and best program) and resumable after a stop file."""

from __future__ import annotations

import json

import pytest

from triforge.maestro.evaluate import evaluate
from triforge.maestro.optimize.runner import Task, optimize
from triforge.maestro.optimize.state import ProgramOptimizeSettings
from triforge.maestro.sim_bed import TOOLS, VALIDATORS, SimLM, sim_tasks
from triforge.maestro.sim_reflection import SimReflection


def _task(t):
    return Task("sim", t.program, t.split("train"), t.split("val"), t.split("test"), t.metric, t.retrievers())


def _settings(**kw):
    return ProgramOptimizeSettings(**{"budget": 300, "tools": TOOLS, "validators": VALIDATORS, "patience": 60, **kw})


def test_every_planted_defect_costs_the_seed_most_of_its_score():
    for t in sim_tasks():
        r = evaluate(t.program, t.examples, t.metric, SimLM(), retrievers=t.retrievers(), jobs=1)
        assert r.mean_score <= 0.25, t.name


def test_maestro_repairs_at_least_five_of_six_and_config_only_none():
    repaired = {"maestro": [], "config-only": []}
    for t in sim_tasks():
        for opt in repaired:
            s = optimize(opt, _task(t), SimLM(), SimReflection(), _settings(), None, jobs=1)
            assert s["spent"]["search_rollouts"] <= 300
            if s["test_best"] >= 0.9:
                repaired[opt].append(t.name)
    assert len(repaired["maestro"]) >= 5, repaired
    assert repaired["config-only"] == [], repaired


def test_invalid_reflection_replies_are_logged_and_counted(tmp_path):
    t = sim_tasks()[4]  # routing: two edits needed, the second reply of the three is broken
    refl = SimReflection(invalid_every=2)
    s = optimize("maestro", _task(t), SimLM(), refl, _settings(patience=20), tmp_path, jobs=1)
    log = [json.loads(x) for x in (tmp_path / "proposals.jsonl").read_text().splitlines()]
    invalid = [p for p in log if "invalid edit" in p["verdict"]]
    assert invalid and all("no node 'answr'" in p["verdict"] for p in invalid)
    assert s["spent"]["calls"]["reflection"] == refl.calls  # a refused reply still spent its call
    accepted = [p for p in log if p["verdict"] == "accepted"]
    assert accepted and all(p["diff"] and p["motivating_ids"] and p["rationale"] for p in accepted
                            if p["step"] == "graph")


def test_same_seed_gives_byte_identical_log_and_best_program(tmp_path):
    t = sim_tasks()[4]
    for d in ("a", "b"):
        optimize("maestro", _task(t), SimLM(), SimReflection(), _settings(seed=7), tmp_path / d, jobs=4)
    for f in ("proposals.jsonl", "best_program.json", "curve.json", "candidates.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_a_stop_file_stops_and_a_rerun_ends_where_an_uninterrupted_run_ends(tmp_path):
    t = sim_tasks()[2]
    full = optimize("maestro", _task(t), SimLM(), SimReflection(), _settings(), tmp_path / "full", jobs=1)
    out = tmp_path / "stopped"

    def stop_after_three(prop, st):
        if prop.index == 2:
            (out / "STOP").write_text("")

    s1 = optimize("maestro", _task(t), SimLM(), SimReflection(), _settings(stop_file=out / "STOP"), out, jobs=1,
                  on_proposal=stop_after_three)
    assert s1["stop_reason"].startswith("stop file") and s1["proposals"] == 3
    (out / "STOP").unlink()
    s2 = optimize("maestro", _task(t), SimLM(), SimReflection(), _settings(stop_file=out / "STOP"), out, jobs=1)
    assert s2["best_hash"] == full["best_hash"] and s2["test_best"] == full["test_best"]
    assert (out / "proposals.jsonl").read_bytes() == (tmp_path / "full" / "proposals.jsonl").read_bytes()


def test_a_run_directory_refuses_a_different_run(tmp_path):
    t = sim_tasks()[3]
    optimize("maestro", _task(t), SimLM(), SimReflection(), _settings(patience=2), tmp_path, jobs=1)
    with pytest.raises(Exception, match="holds a different run .*settings"):
        optimize("maestro", _task(t), SimLM(), SimReflection(), _settings(patience=2, seed=5), tmp_path, jobs=1)


@pytest.mark.parametrize("optimizer", ["mipro", "gepa"])
def test_baselines_run_on_the_bed_within_the_budget(optimizer, tmp_path):
    pytest.importorskip("optuna" if optimizer == "mipro" else "gepa")
    t = sim_tasks()[1]
    s = optimize(optimizer, _task(t), SimLM(), SimReflection(), _settings(budget=60), tmp_path, jobs=1)
    assert s["spent"]["search_rollouts"] <= 60 and s["best_val"] >= 0.0
    assert (tmp_path / "report.html").read_text().count("<svg") == 1
