"""Progress lines: live on a terminal, plain lines in a log, fed from a real agent run's spans."""

from __future__ import annotations

import io

from triforge.core import context
from triforge.core.errors import Submitted
from triforge.core.react import Agent
from triforge.core.tools import tool
from triforge.core.trace import Tracer, listening
from triforge.testing.scripted import ScriptedLLM, call
from triforge.ui.progress import Progress, TraceProgress, short


@tool
def add(a: int, b: int) -> str:
    """Add two numbers.

    Args:
        a: first
        b: second
    """
    return f"the sum is {a + b}\nand nothing else"


@tool
def submit(answer: str) -> str:
    """Submit.

    Args:
        answer: the answer
    """
    raise Submitted(answer)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_plain_mode_prints_a_line_per_step_and_a_heartbeat():
    out, clock = io.StringIO(), FakeClock()
    p = Progress("job", total=3, stream=out, live=False, every_s=10, clock=clock)
    p.set(1)
    p.note("add -> 3")
    assert out.getvalue().count("\n") == 1  # a note alone waits for the next step or heartbeat
    clock.t = 12.0
    p.note("add -> 4")  # past every_s: a heartbeat line
    p.set(2)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and "\r" not in out.getvalue()
    assert "job: step 1 of 3" in lines[0]
    assert lines[2].endswith("job: step 2 of 3 · add -> 4 · 12 s")


def test_live_mode_repaints_one_line_and_clears_it():
    out = io.StringIO()
    p = Progress("job", total=2, stream=out, live=True, tick_s=0.01)
    with p:
        p.set(1)
        p.add_tokens(1500)
        p.note("tool -> ok")
        p.log("a permanent line")
    text = out.getvalue()
    assert "\r\x1b[2Kjob: step 1 of 2" in text and "1,500 tok" in text
    assert "a permanent line\n" in text
    assert text.endswith("\r\x1b[2K")  # closing leaves no half-drawn line behind
    assert "\n" not in text.replace("a permanent line\n", "")


def test_not_a_terminal_means_plain_lines():
    assert Progress("x", stream=io.StringIO()).live is False


def test_short_keeps_one_line_within_width():
    assert short("a\n  b   c", 10) == "a b c"
    assert short("x" * 50, 10) == "x" * 9 + "…"


def test_trace_progress_follows_a_real_agent_run(tmp_path):
    out = io.StringIO()
    progress = Progress("agent", total=5, stream=out, live=False, every_s=3600)
    llm = ScriptedLLM([call("add", a=1, b=2), call("submit", answer="3")])
    with context.use(tracer=Tracer(tmp_path)), listening(TraceProgress(progress)):
        res = Agent(llm, [add, submit], name="solver").run("add 1 and 2")
    assert res.submitted
    lines = out.getvalue().splitlines()
    assert [ln.split("] ", 1)[1].split(" · ")[0] for ln in lines] == ["agent: step 1 of 5", "agent: step 2 of 5"]
    assert "add -> the sum is 3 and nothing else" in lines[1]
    assert progress.tokens > 0


def test_a_failing_listener_does_not_break_the_run(tmp_path):
    def broken(event, record):
        raise RuntimeError("display failed")

    llm = ScriptedLLM([call("submit", answer="x")])
    with context.use(tracer=Tracer(tmp_path)), listening(broken):
        assert Agent(llm, [submit], name="solver").run("go").submitted


def test_plain_mode_says_nothing_for_work_that_ends_at_once_then_beats():
    import time

    out = io.StringIO()
    with Progress("job", stream=out, live=False, tick_s=0.02, first_after_s=0.3, every_s=60):
        pass
    assert out.getvalue() == ""  # a command that fails at once shows only its error
    with Progress("job", stream=out, live=False, tick_s=0.02, first_after_s=0.1, every_s=60):
        time.sleep(0.6)
    assert out.getvalue().count("\n") == 1 and out.getvalue().rstrip().endswith("job · 0 s")
