"""The offline demo: a ReAct agent with a Python tool, against the fake server, through the real client."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from triforge.confine.proc import run as run_proc
from triforge.core.budget import BudgetLimits
from triforge.core.config import ModelConfig
from triforge.core.errors import Submitted
from triforge.core.llm import OpenAICompatLLM
from triforge.core.react import Agent, AgentConfig, AgentLimits, AgentResult
from triforge.core.run import open_run
from triforge.core.rundir import RunDir
from triforge.core.tools import tool
from triforge.testing.fake_server import FakeOpenAIServer
from triforge.ui.trace_view import render_html

TASK = "What is the sum of the squares of the integers from 1 to 100? Compute it with Python, then submit it."
CODE = "print(sum(i * i for i in range(1, 101)))"


@tool
def python_eval(code: str) -> str:
    """Run a short Python program in a fresh subprocess (10 s limit) and return what it printed.

    Args:
        code: the Python source to run
    """
    res = run_proc([sys.executable, "-I", "-c", code], timeout=10, output_limit=8000)
    if res.timed_out:
        return "timed out after 10 s"
    out = res.stdout + (f"\n[stderr]\n{res.stderr}" if res.stderr.strip() else "")
    return out if res.returncode == 0 else f"exit code {res.returncode}\n{out}"


@tool
def submit(answer: str) -> str:
    """Hand in the final answer.

    Args:
        answer: the final answer, as text
    """
    raise Submitted(answer.strip())


def scripted_reply(request: dict[str, Any]) -> dict[str, Any]:
    """The demo's scripted model: it reacts to the tool output it is sent, like a real model would."""
    tool_msgs = [m for m in request.get("messages", []) if m.get("role") == "tool"]
    if not tool_msgs:
        return {"content": "I will compute it with Python.",
                "tool_calls": [{"name": "python_eval", "arguments": {"code": CODE}}]}
    result = str(tool_msgs[-1].get("content", "")).strip()
    return {"content": f"Python printed {result}.", "tool_calls": [{"name": "submit", "arguments": {"answer": result}}]}


def run_demo(out: Path) -> AgentResult:
    rd = RunDir(out)
    with FakeOpenAIServer(scripted_reply) as srv:
        cfg = ModelConfig(model="fake-model", base_url=srv.base_url, timeout_s=10, max_retries=2)
        rd.write_config({"model": {"alias": "scripted-demo", **cfg.model_dump()}, "task": TASK,
                         "note": "the model is scripted (fake OpenAI-compatible server on loopback)"})
        llm = OpenAICompatLLM("scripted-demo", cfg)
        agent = Agent(llm, [python_eval, submit], AgentConfig(limits=AgentLimits(max_steps=6)),
                      name="demo", run_dir=rd.path)
        with open_run(rd.path, llm=llm, cache="off", limits=BudgetLimits(max_calls=10), trace=True):
            result = agent.run(TASK)
    expected = str(sum(i * i for i in range(1, 101)))
    rd.write_results({"task": TASK, "answer": result.output, "expected": expected,
                      "correct": result.output == expected, **result.summary()})
    rd.write_report(
        "# triforge demo\n\nThe model was **scripted** (a fake OpenAI-compatible server on loopback); "
        "the HTTP client, agent loop, tools, budget and trace are real.\n\n"
        f"- task: {TASK}\n- answer: {result.output} (expected {expected})\n- status: {result.status}, "
        f"{result.steps} steps, {result.usage.input_tokens} input / {result.usage.output_tokens} output tokens\n"
        f"\n```json\n{json.dumps(result.summary(), indent=1)}\n```\n"
    )
    render_html(rd.path)
    return result
