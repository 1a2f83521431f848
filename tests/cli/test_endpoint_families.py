"""Every command that talks to a model, end to end against the fake server in each strict family (issue 38):
`cpagent solve`, `maestro optimize` and `astra optimize --evaluate-later` complete with no 400 reaching the
user, the thinking (which plants a decoy tool call, code block and answer) never runs or counts, and the
trace summary shows reasoning and cached tokens where the family reports them."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triforge.core.errors import UserError
from triforge.maestro.placeholder_replies import reply as task_reply
from triforge.testing.fake_server import FakeOpenAIServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cpbench"
PROGRAM = ("# Data\ntotal = 12\ndiff = 2\n# End of data\nimport json\nimport cpmpy as cp\n"
           "x, y = cp.intvar(0, total, shape=2, name=['x', 'y'])\nm = cp.Model(x + y == total, x - y == diff)\n"
           "assert m.solve()\nprint(json.dumps({'x': int(x.value()), 'y': int(y.value())}))\n")
FAMILIES = ["openai-reasoning", "vllm-reasoning", "deepseek", "think-tags", "azure+openai-reasoning"]
KEY_ENV = "TRIFORGE_TEST_AZURE_KEY"


def alias_toml(srv: FakeOpenAIServer, family: str, **extra: str) -> str:
    """The alias a user writes: for Azure, the resource endpoint, deployment and version (a GPT-5 model needs
    nothing else); for the others, only the model name and URL (what the server refuses is learned)."""
    lines = ["[models.ep]"]
    if family.startswith("azure"):
        lines += ['model = "gpt-5-mini"', f'base_url = "http://127.0.0.1:{srv.port}"', 'api_type = "azure"',
                  'api_version = "2024-10-21"', 'deployment = "my-deployment"', f'api_key_env = "{KEY_ENV}"']
    else:
        lines += ['model = "m"', f'base_url = "{srv.base_url}"']
    lines += ["max_retries = 0", *(f"{k} = {v}" for k, v in extra.items())]
    return "\n".join(lines) + "\n"


def triforge(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, KEY_ENV: "azure-test-key"}
    return subprocess.run([sys.executable, "-m", "triforge.cli.app", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL, env=env)


def refusals_said(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "triforge: model 'ep'" in ln and "refused" in ln]


def no_400_reached_the_user(r: subprocess.CompletedProcess) -> None:
    said = refusals_said(r.stderr)
    # the only mention of a 400 is the one line per adapted parameter
    assert all(("HTTP 400" not in ln) or ln in said for ln in r.stderr.splitlines()), r.stderr
    assert "Traceback" not in r.stderr and "answered HTTP 400" not in r.stdout + r.stderr
    assert len(said) == len({ln.split("refused ")[1].split(" ")[0] for ln in said})  # once per parameter


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("protocol", ["native", "text"])
def test_cpagent_solve_against_each_family(tmp_path, family, protocol):
    """Native tool calls, and the text protocol with the small-model profile (stop strings, a re-ask at
    temperature 0.8): both through the same capability adaptation."""
    if protocol == "native":
        script = [{"content": "First a look.", "tool_calls": [{"name": "python_exec", "arguments": {"code": "print(6 * 7)"}}]},
                  {"content": "Submitting.", "tool_calls": [{"name": "submit", "arguments": {"code": PROGRAM}}]}]
        extra, args = {}, []
    else:
        broken = "```python\nprint(x)\n```"
        script = [broken + '\n<tool_response name="python_exec">\n7\n</tool_response>\nSo x is 7.', broken,
                  f"Here is the model.\n```python\n{PROGRAM}```"]
        extra, args = {"native_tools": "false"}, ["--profile", "small-model"]
    with FakeOpenAIServer(script, strict=family) as srv:
        (tmp_path / "triforge.toml").write_text(alias_toml(srv, family, **extra))
        r = triforge("cpagent", "solve", "--data", str(EXAMPLES), "--problem", "two_numbers", "--model", "ep",
                     "--out", str(tmp_path / "run"), "--max-steps", "6", *args, cwd=tmp_path)
        assert srv.remaining == 0 and srv.errors == []
        sent = srv.requests
    assert r.returncode == 0, r.stdout + r.stderr
    no_400_reached_the_user(r)
    rec = json.loads((tmp_path / "run" / "results.json").read_text())
    assert rec["grade"]["status"] == "correct"
    assert not any("reasoning_content" in m for b in sent for m in b["messages"])  # thinking not sent back
    traj = (tmp_path / "run").glob("*.trajectory.json")
    assert all("SystemExit('DECOY" not in json.dumps(
        [m.get("content") for m in json.loads(p.read_text())["messages"] if m["role"] != "assistant"]) for p in traj)
    if family == "openai-reasoning" and protocol == "text":
        assert {x.split("refused ")[1].split(" ")[0] for x in refusals_said(r.stderr)} == {"'stop'", "'temperature'"}
        assert rec["resampled"] == 1 and rec["cut_replies"] == 1  # cut on the client, without `stop`
    if "openai-reasoning" in family or family == "deepseek":
        s = triforge("trace", "summary", str(tmp_path / "run"), cwd=tmp_path)
        assert s.returncode == 0 and "reason-" in s.stdout and "cached" in s.stdout, s.stdout + s.stderr


def maestro_reply(request):
    msgs = request.get("messages", [])
    first = str(msgs[0].get("content", "")) if msgs else ""
    if msgs and msgs[0].get("role") == "user":
        if first.startswith("You improve the structure"):
            return json.dumps({"rationale": "look again", "edits": [
                {"op": "add_retrieval", "target": "answer", "node": {"name": "hop3", "query": "question", "k": 2}}]})
        return "<instruction>Answer with a short factoid.</instruction>"
    return task_reply(request)


@pytest.mark.parametrize("family", FAMILIES)
def test_maestro_optimize_against_each_family(tmp_path, family):
    out = tmp_path / "run"
    with FakeOpenAIServer(maestro_reply, strict=family) as srv:
        (tmp_path / "triforge.toml").write_text(alias_toml(srv, family))
        r = triforge("maestro", "optimize", "--bench", "hotpotqa", "--model", "ep", "--budget", "16", "--out",
                     str(out), "--jobs", "2", cwd=tmp_path)
        assert srv.errors == []
    assert r.returncode == 0, r.stdout + r.stderr
    no_400_reached_the_user(r)
    assert "rollouts" in r.stdout
    for f in ("results.json", "proposals.jsonl", "best_program.json"):
        assert "DECOY" not in (out / f).read_text(), f  # the thinking's planted answer never counted
    # every reply as the client handed it on (the run's response cache): thinking apart from the content
    import sqlite3

    with contextlib.closing(sqlite3.connect(out / "cache.sqlite")) as db:
        replies = [json.loads(r) for (r,) in db.execute("SELECT response FROM responses")]
    assert replies and not any("DECOY" in (c["content"] or "") for c in replies)
    if "openai-reasoning" in family:  # hidden thinking: counted, not shown
        assert all(c["usage"]["reasoning_tokens"] > 0 and "reasoning" not in c for c in replies)
    else:
        assert all("DECOY" in c["reasoning"] for c in replies)


def astra_reply(request):
    """Each role by the tools it is offered: one test shape, an analysis, one plan, one kernel."""
    from astra.test_agents_loop import kernel

    tools = {t["function"]["name"] for t in request.get("tools") or []}
    done = sum(m.get("role") == "tool" for m in request["messages"])
    if "add_test_shape" in tools:
        return {"tool_calls": [{"name": "add_test_shape", "arguments": {"shape": {"num_tokens": 2, "d": 4101},
                                                                          "why": "odd"}}] if not done else
                [{"name": "finish_tests", "arguments": {"summary": "odd d"}}]}
    if "submit_analysis" in tools:
        return {"tool_calls": [{"name": "submit_analysis", "arguments": {"analysis": "memory bound"}}]}
    if "submit_plans" in tools:
        return {"tool_calls": [{"name": "submit_plans", "arguments": {"plans": [
            {"title": "vectorize", "change": "uint4 loads", "predicted_effect": "x1.5"}]}}]}
    return {"tool_calls": [{"name": "submit_kernel", "arguments": {"code": kernel("correct x1.5")}}]}


@pytest.mark.parametrize("family", FAMILIES)
def test_astra_optimize_evaluate_later_against_each_family(tmp_path, family, monkeypatch):
    from astra.test_agents_loop import FakeLab
    from triforge.astra.agents import Deferred
    from triforge.cli import astra_optimize
    from triforge.cli.astra import app

    monkeypatch.setenv(KEY_ENV, "azure-test-key")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(astra_optimize, "make_evaluator", lambda later, gpus: Deferred() if later else FakeLab())
    run = tmp_path / "run"

    def cli(*argv: str) -> tuple[int, str]:
        res = CliRunner().invoke(app, list(argv), terminal_width=240)
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            if isinstance(res.exception, UserError):
                return 2, str(res.exception)
            raise res.exception
        return res.exit_code, res.output

    argv = ["optimize", "--task", "silu_and_mul", "--out", str(run), "-k", "1", "--rounds", "1", "--repairs", "0",
            "--evaluate-later", "--model", "ep", "--max-output-tokens", "4000", "--max-calls", "20"]
    with FakeOpenAIServer(astra_reply, strict=family) as srv, contextlib.ExitStack():
        (tmp_path / "triforge.toml").write_text(alias_toml(srv, family))
        code, out = cli(*argv)
        assert code == 3, out  # the start waits for evaluation
        assert cli("evaluate", str(run))[0] == 0
        code, out = cli(*argv)  # round 1: every role asks the model
        assert code == 3 and "1 candidate(s) wait for evaluation" in out, out
        assert srv.errors == []
        sent, refused = srv.requests, [x["error"]["param"] for x in srv.refused]
    assert len(sent) >= 5
    if "openai" in family:  # the reply caps (output tokens left) go as max_completion_tokens
        assert all("max_tokens" not in b and b["max_completion_tokens"] <= 4000 for b in sent)
    # learned once where nothing was declared; nothing refused where the family defaults apply (Azure GPT-5)
    assert refused == (["max_tokens"] if family == "openai-reasoning" else [])
    source = (run / "candidates" / "r1-k0" / "kernel.cu").read_text()
    assert "FAKE correct x1.5" in source and "DECOY" not in source


@pytest.mark.parametrize("family, says, lines", [
    ("openai-reasoning", ["refused 'max_tokens'", "refused 'temperature'", "refused 'stop'",
                          "reasoning tokens reported", "cached input tokens reported"],
     ['token_limit_param = "max_completion_tokens"', "supports_temperature = false", "supports_stop = false",
      "reasoning = true"]),
    ("think-tags", ["no parameter refused", "thinking text returned"], ["reasoning = true"]),
    ("", ["no parameter refused", "thinking text not returned"], []),
])
def test_ping_reports_what_it_found_and_the_alias_lines(tmp_path, family, says, lines):
    script = ["pong", {"tool_calls": [{"name": "get_time", "arguments": {"city": "Paris"}}]}]
    with FakeOpenAIServer(script, strict=family or None) as srv:
        r = triforge("llm", "ping", "--model", "m", "--base-url", srv.base_url, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert "native tool call" in out and all(s in out for s in says), out
    toml = r.stdout.split("alias lines for triforge.toml:")[1]
    assert sorted(ln for ln in toml.splitlines()[4:] if ln) == sorted(lines), toml
    assert "[models.m]" in toml and 'model = "m"' in toml


def test_serve_fake_with_an_unknown_strict_family_is_one_line_exit_2(tmp_path):
    (tmp_path / "s.json").write_text('["hi"]')
    r = triforge("llm", "serve-fake", "--script", str(tmp_path / "s.json"), "--strict", "gpt5", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown strict family gpt5" in r.stderr
