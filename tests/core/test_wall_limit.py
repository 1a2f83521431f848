"""`max_wall_s` stops a run within a few seconds of the limit, also when the time goes into tool calls:
the limit is checked before each tool call, and a tool reads the time left (`context.remaining_s`) to bound
its own work (cpagent's cells)."""

from __future__ import annotations

import time

from triforge.core import context
from triforge.core.react import Agent, AgentConfig, AgentLimits
from triforge.core.tools import tool
from triforge.testing.scripted import ScriptedLLM


def _slow_calls(n: int) -> dict:
    return {"content": "", "tool_calls": [{"name": "slow", "arguments": {"seconds": 0.6}} for _ in range(n)]}


def test_the_limit_is_checked_between_the_tool_calls_of_one_reply():
    ran: list[float] = []

    @tool
    def slow(seconds: float) -> str:
        """Sleep.

        Args:
            seconds: how long
        """
        time.sleep(seconds)
        ran.append(seconds)
        return "done"

    agent = Agent(ScriptedLLM([_slow_calls(6)]), [slow], AgentConfig(limits=AgentLimits(max_wall_s=1.0)))
    t0 = time.monotonic()
    res = agent.run("go")
    took = time.monotonic() - t0
    assert res.status == "limits_exceeded" and "wall-time" in res.message
    assert len(ran) == 2 and took < 1.0 + 0.6 + 0.5, (len(ran), took)  # not all six (3.6 s)


def test_a_tool_sees_the_time_left_and_nothing_outside_a_limited_run():
    seen: list[float | None] = []

    @tool
    def look() -> str:
        """Report the time left."""
        seen.append(context.remaining_s())
        return "ok"

    @tool
    def submit(answer: str) -> str:
        """Submit.

        Args:
            answer: the answer
        """
        from triforge.core.errors import Submitted

        raise Submitted(answer)

    script = [{"content": "", "tool_calls": [{"name": "look", "arguments": {}}]},
              {"content": "", "tool_calls": [{"name": "submit", "arguments": {"answer": "x"}}]}]
    Agent(ScriptedLLM(list(script)), [look, submit], AgentConfig(limits=AgentLimits(max_wall_s=50))).run("go")
    Agent(ScriptedLLM(list(script)), [look, submit], AgentConfig()).run("go")
    assert seen[0] is not None and 45 < seen[0] <= 50
    assert seen[1] is None
    assert context.remaining_s() is None  # the run's deadline does not outlive it


def test_a_cpagent_cell_is_cut_at_the_wall_limit(tmp_path):
    """A cell that would run 60 s (the cell timeout) ends near the 4 s wall limit, and so does the run."""
    from triforge.cpagent.agent import CPAgentConfig, run_cpagent
    from triforge.cpagent.task import task_from_file

    problem = tmp_path / "p.md"
    problem.write_text("Pick x in 1..3.\nOutput keys: x\n")
    script = [{"content": "", "tool_calls": [{"name": "python_exec", "arguments": {"code": "import time\ntime.sleep(60)"}}]}]
    config = CPAgentConfig(limits=AgentLimits(max_wall_s=4.0, max_steps=5), cell_timeout_s=60.0)
    t0 = time.monotonic()
    res, _ = run_cpagent(ScriptedLLM(script), task_from_file(problem), config=config, run_dir=tmp_path / "run")
    took = time.monotonic() - t0
    assert res.status == "limits_exceeded" and "wall-time" in res.message, res.message
    assert took < 4.0 + 8, took  # kernel start, the interrupt and its grace included; not 60 s


def test_a_model_reply_in_flight_is_cut_at_the_limit_not_at_the_clients_timeout():
    """The request waits no longer than the time left: a server that answers after 20 s (the client's own
    timeout is 60 s) ends the run about when the 1.5 s limit says, as a limit, not as an endpoint error."""
    from triforge.core.config import ModelConfig
    from triforge.core.llm import OpenAICompatLLM
    from triforge.testing.fake_server import FakeOpenAIServer

    with FakeOpenAIServer([{"content": "late", "delay_s": 20}]) as srv:
        llm = OpenAICompatLLM("fake", ModelConfig(model="m", base_url=srv.base_url, timeout_s=60, max_retries=3))
        agent = Agent(llm, [], AgentConfig(limits=AgentLimits(max_wall_s=1.5)))
        t0 = time.monotonic()
        res = agent.run("go")
        took = time.monotonic() - t0
    assert res.status == "limits_exceeded" and "wall-time" in res.message, (res.status, res.message)
    assert took < 1.5 + 2.0, took
    assert len(srv.requests) == 1  # a limit is not retried
