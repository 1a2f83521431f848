"""A maestro run directory reuses a result only when everything that could change it is the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from triforge.core.config import ModelConfig
from triforge.core.llm import OpenAICompatLLM
from triforge.core.provenance import StaleResults
from triforge.data import get
from triforge.maestro.placeholder_replies import reply
from triforge.maestro.run import evaluate_to_dir
from triforge.testing.fake_server import FakeOpenAIServer

MINI = get("hotpotqa-mini").root


def llm(srv: FakeOpenAIServer, model: str = "model-a", **cfg) -> OpenAICompatLLM:
    return OpenAICompatLLM("m", ModelConfig(model=model, base_url=srv.base_url, max_retries=0, **cfg))


def run(models, out, **kw):
    return evaluate_to_dir(None, "hotpotqa", "val", models, out, jobs=2, **kw)


@pytest.mark.parametrize("change, field", [
    ({"model": "model-b"}, "models.(default)"),
    ({"temperature": 0.9}, "models.(default)"),
    ({"extra_body": {"top_k": 5}}, "models.(default)"),
])
def test_other_model_settings_are_refused_not_served_from_the_store(tmp_path, change, field):
    """Reproduction: model B was served model A's scores (cached, asked 0 times) from the same --out."""
    out = tmp_path / "run"
    with FakeOpenAIServer(reply) as srv:
        first = run(llm(srv), out)
        asked = len(srv.requests)
        assert first["n"] == 5 and first["cached"] == 0 and asked == 20
        settings = {"model": "model-a", **change}
        with pytest.raises(StaleResults, match=r"use a new --out or --fresh") as e:
            run(llm(srv, **settings), out)
        assert field in str(e.value) and len(srv.requests) == asked  # nothing served, nothing asked
        again = run(llm(srv), out)  # the same settings resume: nothing is asked again
        assert again["cached"] == 5 and len(srv.requests) == asked
        fresh = run(llm(srv, **settings), out, fresh=True)  # --fresh: earlier results moved aside, all re-run
        assert fresh["cached"] == 0 and len(srv.requests) == 2 * asked
    moved = Path(fresh["moved_aside"])
    assert moved.parent == out and moved.name.startswith("previous-")
    assert len((moved / "results.jsonl").read_text().splitlines()) == 5  # the user's earlier results are kept
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert {r["settings_hash"] for r in rows} == {fresh["settings_hash"]} and all("commit" in r for r in rows)


def test_other_data_and_endpoint_are_refused_but_split_and_limit_share_the_directory(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text((MINI / "questions.jsonl").read_text())
    out = tmp_path / "run"
    corpus = str(MINI / "corpus.jsonl")  # given, so the data file is not also the corpus
    with FakeOpenAIServer(reply) as srv, FakeOpenAIServer(reply) as other:
        run(llm(srv), out, data=str(data), corpus=corpus, limit=2)
        n = len(srv.requests)
        grown = run(llm(srv), out, data=str(data), corpus=corpus, limit=4)  # more of the same data: resumes
        assert grown["cached"] == 2 and len(srv.requests) == n + 2 * 4
        with pytest.raises(StaleResults, match=r"models\.\(default\)"):  # same model name, another endpoint
            run(llm(other), out, data=str(data), corpus=corpus, limit=4)
        rows = (MINI / "questions.jsonl").read_text().splitlines()
        edited = [json.loads(r) for r in rows]
        for r in edited:
            r["answer"] = r["answer"] + " (edited)"
        data.write_text("\n".join(json.dumps(r) for r in edited) + "\n")  # same ids, other content
        with pytest.raises(StaleResults, match="data that has changed"):
            run(llm(srv), out, data=str(data), corpus=corpus, limit=4)
        run(llm(srv), tmp_path / "run2", data=str(data), limit=1)
        data.write_text(data.read_text() + "\n")
        with pytest.raises(StaleResults, match=r"sources\.corpus differs"):  # without --corpus, the data is it
            run(llm(srv), tmp_path / "run2", data=str(data), limit=1)


def test_a_directory_without_recorded_settings_is_refused(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAIServer(reply) as srv:
        run(llm(srv), out)
        (out / "provenance.json").unlink()  # as an older triforge left it
        with pytest.raises(StaleResults, match="no record of their settings"):
            run(llm(srv), out)


def test_cli_refuses_in_one_line_and_fresh_moves_aside(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAIServer(reply) as srv:
        base = [sys.executable, "-m", "triforge.cli.app", "maestro", "run", "--bench", "hotpotqa", "--split", "val",
                "--base-url", srv.base_url, "--out", str(out), "--jobs", "2"]
        first = subprocess.run([*base, "--model", "model-a"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        r = subprocess.run([*base, "--model", "model-b"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "models.(default)" in r.stderr and "--fresh" in r.stderr
        r = subprocess.run([*base, "--model", "model-b", "--fresh"], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "0 from earlier runs" in r.stdout and "earlier contents moved to" in r.stdout
    assert json.loads((out / "config.json").read_text())["model"]["model"] == "model-b"
    assert [p.name.startswith("previous-") for p in out.iterdir() if p.is_dir()] == [True]


def test_a_corpus_changed_under_the_same_path_or_through_the_environment_is_refused(tmp_path, monkeypatch):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text((MINI / "corpus.jsonl").read_text())
    monkeypatch.setenv("TRIFORGE_HOTPOTQA_CORPUS", str(corpus))
    out = tmp_path / "run"
    with FakeOpenAIServer(reply) as srv:
        run(llm(srv), out, limit=1)
        run(llm(srv), out, limit=1)  # unchanged: resumes
        corpus.write_text(corpus.read_text() + '{"title": "Extra", "text": "A passage added later."}\n')
        with pytest.raises(StaleResults, match=r"\(sources\.corpus differs\)"):
            run(llm(srv), out, limit=1)
        monkeypatch.delenv("TRIFORGE_HOTPOTQA_CORPUS")
        with pytest.raises(StaleResults, match=r"\(sources\.corpus differs\)"):
            run(llm(srv), out, limit=1)
