"""The ReAct loop: ask the model, run the tools it calls, feed back what they return, until a tool submits.

Control flow is by exceptions (`Submitted`, `LimitsExceeded`, `BudgetExceeded`, `FormatError`),
raised where they happen and handled here, in `Agent.run`. Message formats and parsing belong to the
adapter (`triforge.core.adapter`); aids for weak models are an opt-in `LoopPolicy`
(`triforge.core.small_model_policy`), never the loop's defaults.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triforge.core import context
from triforge.core.adapter import ChatAdapter
from triforge.core.errors import BudgetExceeded, EndpointError, FormatError, LimitsExceeded, Submitted
from triforge.core.llm import LLM, Completion, Usage
from triforge.core.policy import LoopPolicy
from triforge.core.tools import Call, Tool, ToolSet, cap_text
from triforge.core.trace import agent_scope

__all__ = [
    "Agent", "AgentConfig", "AgentLimits", "AgentResult", "LoopPolicy", "agent_as_tool",
    "Submitted", "LimitsExceeded", "BudgetExceeded", "FormatError",
]


@dataclass
class AgentLimits:
    max_steps: int = 30
    max_tokens: int | None = None  # input + output, summed over the agent's calls
    max_cost_usd: float | None = None
    max_wall_s: float | None = None
    max_format_errors: int = 3  # consecutive


@dataclass
class AgentConfig:
    system: str = "You are a helpful agent. Use the tools to solve the task, then submit."
    limits: AgentLimits = field(default_factory=AgentLimits)
    temperature: float | None = None
    max_tokens_per_call: int | None = None
    observation_limit: int = 10_000  # characters of tool output sent back per call
    sample: int = 0  # sample index: repeated runs (seeds) stay distinct in the response cache


@dataclass
class AgentResult:
    status: str  # submitted | limits_exceeded | budget_exceeded | endpoint_error
    output: Any = None
    message: str = ""
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    wall_s: float = 0.0
    format_errors: int = 0
    cut_replies: int = 0  # text-protocol replies cut where the model began writing a result itself
    policy: dict[str, int] = field(default_factory=dict)  # the policy's counters (LoopPolicy.counts)
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def submitted(self) -> bool:
        return self.status == "submitted"

    def summary(self) -> dict[str, Any]:
        return {
            "status": self.status, "message": self.message, "steps": self.steps,
            "input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens,
            "cost_usd": self.cost_usd, "wall_s": round(self.wall_s, 3), "format_errors": self.format_errors,
            "cut_replies": self.cut_replies, **self.policy,
        }


class Agent:
    def __init__(
        self,
        llm: LLM,
        tools: ToolSet | list[Tool | Callable[..., Any]],
        config: AgentConfig | None = None,
        *,
        name: str = "agent",
        run_dir: str | Path | None = None,
        policy: LoopPolicy | None = None,
    ) -> None:
        self.llm = llm
        self.tools = tools if isinstance(tools, ToolSet) else ToolSet(tools)
        self.config = config or AgentConfig()
        self.name = name
        self.run_dir = Path(run_dir) if run_dir else None
        self.policy = policy or LoopPolicy()
        self._cut: dict[int, bool] = {}  # id of each reply asked for in this step -> whether it was cut
        self._t0 = time.monotonic()  # when the current run started (reset by `run`)
        self.adapter = ChatAdapter(self.tools, native=bool(getattr(llm.config, "native_tools", True)),
                                   result_markers=self.policy.stop_strings())

    def run(self, task: str) -> AgentResult:
        res = AgentResult(status="running")
        res.messages = [{"role": "system", "content": self.adapter.system(self.config.system)},
                        {"role": "user", "content": task}]
        t0 = time.monotonic()
        consecutive_format_errors = 0
        self.policy.start()
        tracer = context.tracer()
        self._t0 = t0
        with agent_scope(self.name), context.deadline(self.config.limits.max_wall_s):
            try:
                while True:
                    self._check_limits(res, t0)
                    res.steps += 1
                    if tracer:
                        with tracer.span("agent.step", kind="step", **{"triforge.step": res.steps}):
                            ok = self._step(res)
                    else:
                        ok = self._step(res)
                    consecutive_format_errors = 0 if ok else consecutive_format_errors + 1
                    self._save(res)
                    if consecutive_format_errors >= self.config.limits.max_format_errors:
                        raise LimitsExceeded(f"{consecutive_format_errors} consecutive format errors")
            except Submitted as s:
                res.status, res.output, res.message = "submitted", s.output, str(s)
            except LimitsExceeded as e:
                res.status, res.message = "limits_exceeded", str(e)
            except BudgetExceeded as e:
                res.status, res.message = "budget_exceeded", str(e)
            except EndpointError as e:
                res.status, res.message = "endpoint_error", str(e)
            finally:
                res.wall_s = time.monotonic() - t0
                res.policy = self.policy.counts()
                self._save(res)
        return res

    def _check_limits(self, res: AgentResult, t0: float) -> None:
        lim = self.config.limits
        if res.steps >= lim.max_steps:
            raise LimitsExceeded(f"step limit reached ({lim.max_steps})")
        tokens = res.usage.input_tokens + res.usage.output_tokens
        if lim.max_tokens is not None and tokens >= lim.max_tokens:
            raise LimitsExceeded(f"token limit reached ({tokens} of {lim.max_tokens})")
        if lim.max_cost_usd is not None and res.cost_usd >= lim.max_cost_usd:
            raise LimitsExceeded(f"cost limit reached (${res.cost_usd:.4f} of ${lim.max_cost_usd})")
        self._check_wall(t0)

    def _check_wall(self, t0: float) -> None:
        """Before each model call and each tool call: a reply asking for many slow calls stops at the limit."""
        lim = self.config.limits
        if lim.max_wall_s is not None and time.monotonic() - t0 >= lim.max_wall_s:
            raise LimitsExceeded(f"wall-time limit reached ({lim.max_wall_s:g} s)")

    def _ask(self, res: AgentResult, temperature: float | None, sample: int) -> Completion:
        comp = self.llm.complete(res.messages, temperature=temperature, max_tokens=self.config.max_tokens_per_call,
                                 sample=sample, **self.adapter.request())
        res.usage.input_tokens += comp.usage.input_tokens
        res.usage.output_tokens += comp.usage.output_tokens
        res.cost_usd += comp.cost_usd
        cut = self.adapter.read(comp)  # cut at a result the model began writing itself
        self._cut[id(comp)] = cut
        res.cut_replies += cut
        return comp

    def _step(self, res: AgentResult) -> bool:
        """One model call and the tools it asks for; False when the reply was malformed."""
        first, self._cut = len(res.messages), {}
        comp = self.policy.choose(self._ask(res, self.config.temperature, self.config.sample),
                                  lambda t, offset: self._ask(res, t, self.config.sample + offset))
        cut = self._cut.get(id(comp), False)
        try:
            calls = self.adapter.parse(comp)
        except FormatError as e:
            recovered = self.policy.recover(comp, self.tools, e)
            if recovered is None:
                res.format_errors += 1
                res.messages.append(self.adapter.assistant(comp))
                res.messages.append({"role": "user", "content": self._format_error_message(e, comp, cut)})
                self.policy.after_step(res.messages, first)
                return False
            calls = recovered
        if self.policy.before_calls(res.messages, calls):
            res.messages.append(self.adapter.assistant(comp, calls))
            for call in calls:
                self._check_wall(self._t0)
                text = self.policy.observation(call, self._execute(call))
                res.messages.append(self.adapter.observation(call, text))
            self.policy.after_step(res.messages, first)
        return True

    def _format_error_message(self, error: FormatError, comp: Completion, cut: bool) -> str:
        told = self.policy.format_error(error, comp, self.config.max_tokens_per_call)
        if told is not None:
            return told
        hint = (" (Your reply was cut where you began writing a result yourself: results come only from the "
                "harness, after your call.)") if cut else ""
        return f"Format error: {error}{hint}"

    def _execute(self, call: Call) -> str:
        tracer = context.tracer()
        t0 = time.perf_counter()
        status = "ok"
        try:
            out = call.tool(**call.arguments)
            text = out if isinstance(out, str) else json.dumps(out, default=str, ensure_ascii=False)
        except Submitted:
            if tracer:
                tracer.tool_span(call.tool.name, call.arguments, "submitted", time.perf_counter() - t0,
                                 call_id=call.id)
            raise
        except (BudgetExceeded, LimitsExceeded, EndpointError):
            raise
        except FormatError as e:  # a tool rejecting its input: the model is told why
            status, text = "rejected", f"Rejected: {e}"
        except Exception as e:  # noqa: BLE001 - any tool failure goes back to the model
            status, text = "error", f"Error: {type(e).__name__}: {e}"
        text, _ = cap_text(text, self.config.observation_limit)
        if tracer:
            tracer.tool_span(call.tool.name, call.arguments, text, time.perf_counter() - t0, status, call.id)
        return text

    def _save(self, res: AgentResult) -> None:
        if self.run_dir is None:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / f"{self.name}.trajectory.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"summary": res.summary(), "messages": res.messages}, indent=1,
                                  ensure_ascii=False, default=str))
        tmp.replace(path)


def agent_as_tool(make_agent: Callable[[], Agent], name: str, description: str) -> Tool:
    """Wrap an agent so that another agent can call it with a task and get its output back."""

    def run_subagent(task: str) -> str:
        result = make_agent().run(task)
        if result.status == "budget_exceeded":
            raise BudgetExceeded(result.message)
        if not result.submitted:
            return f"The {name} agent stopped without an answer: {result.status}: {result.message}"
        out = result.output
        return out if isinstance(out, str) else json.dumps(out, default=str)

    run_subagent.__doc__ = f"{description}\n\nArgs:\n    task: the task for the {name} agent, self-contained."
    return Tool.from_function(run_subagent, name=name)
