"""maestro optimize on Ray (2 workers on loopback): the same search as on the local pool, and the search's
call cap held by its one ledger owner across workers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from triforge.core.config import ModelConfig
from triforge.core.llm import OpenAICompatLLM
from triforge.executors import local as executor_mod
from triforge.executors.local import LocalPool
from triforge.maestro.optimize.runner import Task, optimize
from triforge.maestro.optimize.state import ProgramOptimizeSettings
from triforge.maestro.sim_bed import TOOLS, VALIDATORS, SimLM, sim_tasks
from triforge.maestro.sim_reflection import SimReflection
from triforge.testing.fake_server import FakeOpenAIServer

SEARCH_FILES = ("proposals.jsonl", "best_program.json", "curve.json", "candidates.json")


def _task(t, test: bool = True) -> Task:
    return Task("sim", t.program, t.split("train"), t.split("val"), t.split("test") if test else [], t.metric,
                t.retrievers())


def _settings(**kw) -> ProgramOptimizeSettings:
    return ProgramOptimizeSettings(**{"budget": 120, "tools": TOOLS, "validators": VALIDATORS, "patience": 30, **kw})


def _untimed(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "wall_s"}


def test_optimize_on_ray_makes_the_same_search_as_on_the_local_pool(rex, tmp_path):
    t = sim_tasks()[4]  # routing: a graph edit and a config edit to find
    with executor_mod.use(LocalPool()):
        local = optimize("maestro", _task(t), SimLM(), SimReflection(), _settings(seed=7), tmp_path / "local", jobs=2)
    with executor_mod.use(rex):
        on_ray = optimize("maestro", _task(t), SimLM(), SimReflection(), _settings(seed=7), tmp_path / "ray", jobs=2)
    assert local["accepted"] >= 1 and local["spent"]["calls"]["task"] > 0
    assert _untimed(on_ray) == _untimed(local)
    for f in SEARCH_FILES:
        assert (tmp_path / "ray" / f).read_bytes() == (tmp_path / "local" / f).read_bytes(), f


def _sim_server_reply(body: dict) -> dict:
    """The simulated task model behind HTTP, so the driver counts every call the workers send."""
    return {"content": SimLM().complete(body["messages"]).content, "delay_s": 0.01}


@pytest.mark.parametrize("cap", [23, 41, 67])
def test_the_search_call_cap_holds_across_ray_workers(rex, cap):
    t = sim_tasks()[2]
    with FakeOpenAIServer(_sim_server_reply) as srv:
        task_llm = OpenAICompatLLM("sim", ModelConfig(model="sim", base_url=srv.base_url, max_retries=0,
                                                      timeout_s=20))
        refl = SimReflection()
        with executor_mod.use(rex):
            s = optimize("maestro", _task(t, test=False), task_llm, refl, _settings(max_calls=cap, seed=cap), None,
                         jobs=2)
        sent = len(srv.requests)
    calls = s["spent"]["calls"]
    # every call was reserved with the one ledger before it went out: none past the cap, none uncounted
    assert sent == calls["task"] and refl.calls == calls["reflection"]
    assert sent + refl.calls <= cap and s["search_calls"] <= cap
    assert f"calls of {cap}" in s["stop_reason"], s["stop_reason"]


def _cli_reply(request: dict) -> str:
    """Task nodes get the fake HotpotQA answers; reflection prompts an instruction or a valid graph edit."""
    from triforge.maestro.placeholder_replies import reply as task_reply

    msgs = request.get("messages", [])
    if msgs and msgs[0].get("role") == "user":
        if str(msgs[0].get("content", "")).startswith("You improve the structure"):
            return json.dumps({"rationale": "look again", "edits": [
                {"op": "add_retrieval", "target": "answer", "node": {"name": "hop3", "query": "question", "k": 2}}]})
        return "<instruction>Answer with a short factoid.</instruction>"
    return task_reply(request)


def test_maestro_compare_on_an_existing_cluster_matches_the_local_pool(rex, tmp_path):
    import ray

    address = ray.get_runtime_context().gcs_address
    base = [sys.executable, "-m", "triforge.cli.app", "maestro", "compare", "--optimizers", "maestro,mipro",
            "--bench", "hotpotqa", "--model", "fake-model", "--max-rollouts", "24", "--limits", "6,4,2", "--jobs", "2",
            "--max-calls", "400"]
    ray_args = ["--executor", "ray", "--ray-address", address, "--cache", "rw"]
    with FakeOpenAIServer(_cli_reply) as srv:
        for where, extra in (("local", ["--cache", "rw"]), ("ray", ray_args)):
            done = subprocess.run([*base, "--base-url", srv.base_url, "--out", str(tmp_path / where), *extra],
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
        sent = len(srv.requests)
        log = (tmp_path / "ray" / "maestro" / "proposals.jsonl").read_bytes()
        rows = {w: json.loads((tmp_path / w / "compare.json").read_text()) for w in ("local", "ray")}
        again = subprocess.run([*base, "--base-url", srv.base_url, "--out", str(tmp_path / "ray"), *ray_args],
                               capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr[-2000:]
        # the re-run replays every call from the run's cache, the workers' through the ledger actor
        assert len(srv.requests) == sent and (tmp_path / "ray" / "maestro" / "proposals.jsonl").read_bytes() == log
        replayed = json.loads((tmp_path / "ray" / "compare.json").read_text())
        assert [r["spent"]["sent"] for r in replayed] == [0, 0]
        bad = subprocess.run([sys.executable, "-m", "triforge.cli.app", "maestro", "optimize", "--bench", "hotpotqa",
                              "--max-rollouts", "24", "--out", str(tmp_path / "bad"), "--ray-address", address],
                             capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--ray-address needs --executor ray" in bad.stderr and "Traceback" not in bad.stderr
    assert [_untimed(r) for r in rows["ray"]] == [_untimed(r) for r in rows["local"]]
    assert all(r["spent"]["calls"]["reflection"] > 0 and r["spent"]["calls"]["task"] > 0 for r in rows["local"])
    for name in ("maestro", "mipro"):
        for f in ("proposals.jsonl", "best_program.json"):
            assert (tmp_path / "ray" / name / f).read_bytes() == (tmp_path / "local" / name / f).read_bytes(), \
                (name, f)
