"""Core overhead: agent-loop step with the scripted model, one call through the fake server, 16 agents in parallel.

Run: .venv/bin/python benchmarks/core_overhead.py   (writes benchmarks/results/core-overhead-DATE.{json,md})
Targets (issue 2): step p50 <= 2 ms; fake-server call p50 <= 10 ms; 16 parallel agents >= 10x serial.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path

from triforge.core import context
from triforge.core.config import ModelConfig
from triforge.core.errors import Submitted
from triforge.core.llm import OpenAICompatLLM
from triforge.core.react import Agent, AgentConfig, AgentLimits
from triforge.core.tools import tool
from triforge.executors.parallel import pmap
from triforge.testing.fake_server import FakeOpenAIServer
from triforge.testing.scripted import ScriptedLLM, call

RESULTS = Path(__file__).resolve().parent / "results"


@tool
def noop(x: int) -> int:
    """Return x.

    Args:
        x: a number
    """
    return x


@tool
def submit(answer: str) -> str:
    """Submit.

    Args:
        answer: the answer
    """
    raise Submitted(answer)


def step_overhead(steps: int = 200, reps: int = 15) -> list[float]:
    per_step = []
    for _ in range(reps):
        llm = ScriptedLLM([call("noop", x=i) for i in range(steps)] + [call("submit", answer="ok")])
        agent = Agent(llm, [noop, submit], AgentConfig(limits=AgentLimits(max_steps=steps + 5)))
        t0 = time.perf_counter()
        agent.run("go")
        per_step.append((time.perf_counter() - t0) / (steps + 1))
    return per_step


def fake_call_latency(n: int = 300) -> list[float]:
    with FakeOpenAIServer(lambda body: "ok") as srv:
        llm = OpenAICompatLLM("f", ModelConfig(model="fake-model", base_url=srv.base_url))
        msgs = [{"role": "user", "content": "hi"}]
        for _ in range(10):
            llm.complete(msgs)
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            llm.complete(msgs)
            out.append(time.perf_counter() - t0)
    return out


def parallel_agents(n: int = 16, delay: float = 0.2) -> tuple[float, float]:
    def reply(body):
        if any(m.get("role") == "tool" for m in body["messages"]):
            return call("submit", answer="done")
        return call("noop", x=1)

    with FakeOpenAIServer(reply, delay_s=delay) as srv:
        # One client per alias, shared by every agent (it is thread-safe), as triforge's runners do.
        llm = OpenAICompatLLM("f", ModelConfig(model="fake-model", base_url=srv.base_url, max_concurrency=16))

        def one(_: int) -> str:
            return Agent(llm, [noop, submit]).run("go").output

        with context.use(limits=context.EndpointLimits()):
            t0 = time.perf_counter()
            serial = pmap(one, range(n), jobs=1)
            t_serial = time.perf_counter() - t0
            t0 = time.perf_counter()
            par = pmap(one, range(n), jobs=n)
            t_par = time.perf_counter() - t0
    assert serial == par == ["done"] * n
    return t_serial, t_par


def main() -> None:
    steps = step_overhead()
    calls = fake_call_latency()
    t_serial, t_par = parallel_agents()
    res = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.node()} {platform.machine()} python {platform.python_version()}",
        "step_overhead_ms_p50": statistics.median(steps) * 1e3,
        "fake_server_call_ms_p50": statistics.median(calls) * 1e3,
        "fake_server_call_ms_p90": statistics.quantiles(calls, n=10)[-1] * 1e3,
        "parallel16_serial_s": t_serial,
        "parallel16_parallel_s": t_par,
        "parallel16_speedup": t_serial / t_par,
    }
    rows = [
        ("agent-loop step overhead, scripted model (p50)", f"{res['step_overhead_ms_p50']:.3f} ms", "<= 2 ms"),
        ("one call through fake server, real client (p50)", f"{res['fake_server_call_ms_p50']:.2f} ms", "<= 10 ms"),
        ("16 agents x 2 calls, 200 ms/reply: serial", f"{t_serial:.2f} s", ""),
        ("16 agents x 2 calls, 200 ms/reply: parallel", f"{t_par:.2f} s", ""),
        ("parallel speedup", f"{res['parallel16_speedup']:.1f}x", ">= 10x"),
    ]
    md = [f"# core overhead ({res['date']}, {res['machine']})", "", "| measure | value | target |",
          "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows]
    print("\n".join(md))
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / f"core-overhead-{res['date']}"
    stem.with_suffix(".json").write_text(json.dumps(res, indent=2))
    stem.with_suffix(".md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
