"""The ReAct loop: ask the model, run the tools it calls, feed back what they return, until a tool submits.

Control flow is by exceptions (`Submitted`, `LimitsExceeded`, `BudgetExceeded`, `FormatError`),
raised where they happen and handled here, in `Agent.run`.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triforge.core import context
from triforge.core.errors import BudgetExceeded, EndpointError, FormatError, LimitsExceeded, Submitted
from triforge.core.llm import LLM, Completion, Usage
from triforge.core.proc import cap_text
from triforge.core.tools import Call, Tool, ToolSet, tool_calls_for
from triforge.core.trace import agent_scope

__all__ = [
    "Agent", "AgentConfig", "AgentLimits", "AgentResult", "agent_as_tool",
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
    # A reply identical to an earlier one in the run is asked for again, up to this many times, at
    # `resample_temperature`: at temperature 0 a small model otherwise loops on the same reply.
    resample_repeats: int = 0
    resample_temperature: float = 0.8
    # A malformed reply that stopped at the per-reply token limit is told so (and to write shorter
    # replies) instead of the generic "no tool call": the model cannot see where its reply was cut.
    explain_length_cut: bool = True
    # A call sent a third time, unchanged, is not run: every earlier exchange that sent it leaves the context,
    # replaced by one note with the result it gave. A small model copies code it can still see: replayed at 12
    # dead ends, Qwen2.5-Coder-1.5B resent the code 12 times as run, once with it forgotten
    # (benchmarks/results/local-model-repeat-replay-2026-12-04.md). cpagent turns it on.
    forget_repeats: bool = False


RESAMPLE_OFFSET = 1000  # sample indices of re-asked replies: sample + RESAMPLE_OFFSET * attempt
# Text protocol: tool results come back as `<tool_response ...>` blocks. A small model goes on to write
# those itself, or the code's output in a ```output block (Qwen2.5-Coder's notebook habit), and then
# answers its own invention; its reply is cut where it starts one.
INVENTED_RESULT_MARKERS = ("<tool_response", "```output")


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
    resampled: int = 0  # replies asked for again because they repeated an earlier reply
    forgotten: int = 0  # calls sent a third time and taken out of the context instead (forget_repeats)
    cut_replies: int = 0  # text-protocol replies that went on to write a tool response themselves
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def submitted(self) -> bool:
        return self.status == "submitted"

    def summary(self) -> dict[str, Any]:
        return {
            "status": self.status, "message": self.message, "steps": self.steps,
            "input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens,
            "cost_usd": self.cost_usd, "wall_s": round(self.wall_s, 3), "format_errors": self.format_errors,
            "resampled": self.resampled, "forgotten": self.forgotten, "cut_replies": self.cut_replies,
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
    ) -> None:
        self.llm = llm
        self.tools = tools if isinstance(tools, ToolSet) else ToolSet(tools)
        self.config = config or AgentConfig()
        self.name = name
        self.run_dir = Path(run_dir) if run_dir else None
        self.native = bool(getattr(llm.config, "native_tools", True))

    def _system_prompt(self) -> str:
        if self.native:
            return self.config.system
        return f"{self.config.system}\n\n{self.tools.text_protocol()}"

    def run(self, task: str) -> AgentResult:
        res = AgentResult(status="running")
        res.messages = [{"role": "system", "content": self._system_prompt()}, {"role": "user", "content": task}]
        t0 = time.monotonic()
        consecutive_format_errors = 0
        seen: set[str] = set()  # the replies so far, for resampling repeats
        # id of each assistant message in the context -> the calls it sent; of each forget note -> the calls it
        # stands for (ids are dropped with their messages: a freed dict's id can come back for another)
        self._calls_of: dict[int, str] = {}
        self._sends: Counter[str] = Counter()  # the calls -> how often the model sent them
        self._last_result: dict[str, str] = {}  # the calls -> what they returned the last time they ran
        tracer = context.tracer()
        with agent_scope(self.name):
            try:
                while True:
                    self._check_limits(res, t0)
                    res.steps += 1
                    if tracer:
                        with tracer.span("agent.step", kind="step", **{"triforge.step": res.steps}):
                            ok = self._step(res, seen)
                    else:
                        ok = self._step(res, seen)
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
        if lim.max_wall_s is not None and time.monotonic() - t0 >= lim.max_wall_s:
            raise LimitsExceeded(f"wall-time limit reached ({lim.max_wall_s:g} s)")

    def _ask(self, res: AgentResult, temperature: float | None, sample: int) -> tuple[Completion, bool]:
        """One model call; True with it when the reply was cut at an invented result (text protocol)."""
        comp = self.llm.complete(
            res.messages,
            tools=self.tools.schemas() if self.native else None,
            temperature=temperature,
            max_tokens=self.config.max_tokens_per_call,
            sample=sample,
            stop=None if self.native else list(INVENTED_RESULT_MARKERS),
        )
        res.usage.input_tokens += comp.usage.input_tokens
        res.usage.output_tokens += comp.usage.output_tokens
        res.cost_usd += comp.cost_usd
        if self.native or not comp.content or comp.finish_reason == "length":
            return comp, False
        # Cut here, or by a server honouring `stop` (finish_reason "stop", a code fence left open).
        text, cut = cut_invented_response(comp.content)
        cut = cut or text != comp.content
        res.cut_replies += cut
        comp.content = text
        return comp, cut

    def _step(self, res: AgentResult, seen: set[str]) -> bool:
        """One model call and the tools it asks for; False when the reply was malformed."""
        comp, cut = self._ask(res, self.config.temperature, self.config.sample)
        for attempt in range(1, self.config.resample_repeats + 1):
            if _signature(comp) not in seen:
                break
            res.resampled += 1
            comp, cut = self._ask(res, self.config.resample_temperature,
                                  self.config.sample + RESAMPLE_OFFSET * attempt)
        seen.add(_signature(comp))
        try:
            calls = self.tools.parse(comp, native=self.native)
        except FormatError as e:
            res.format_errors += 1
            res.messages.append({"role": "assistant", "content": comp.content or ""})
            res.messages.append({"role": "user", "content": self._format_error_message(e, comp, cut)})
            return False
        key = _calls_key(calls)
        self._sends[key] += 1
        if self.config.forget_repeats and self._sends[key] >= 3:
            self._forget(res, key)
            return True
        msg: dict[str, Any] = {"role": "assistant", "content": comp.content or ""}
        self._calls_of[id(msg)] = key
        if self.native:
            msg["tool_calls"] = [tc.as_message_part() for tc in tool_calls_for(calls)]
        res.messages.append(msg)
        results = []
        for call in calls:
            results.append(self._execute(call))
            self._observe(res, call, results[-1])
        self._last_result[key] = "\n".join(results)
        return True

    def _forget(self, res: AgentResult, key: str) -> None:
        """Take every exchange that sent the calls `key` out of the context, and an earlier note for them:
        one note at the end says how often they were sent and what they gave."""
        kept: list[dict[str, Any]] = []
        dropping = False
        for m in res.messages:
            calls = self._calls_of.get(id(m))
            if m["role"] == "assistant" or calls is not None:  # a reply starts an exchange, a note is one alone
                dropping = calls == key
            if dropping:
                self._calls_of.pop(id(m), None)
            else:
                kept.append(m)
        res.messages[:] = kept
        res.forgotten += 1
        note = {"role": "user", "content": forget_note(self._sends[key], self._last_result.get(key, ""))}
        self._calls_of[id(note)] = key
        res.messages.append(note)

    def _format_error_message(self, error: FormatError, comp: Completion, cut: bool) -> str:
        if comp.finish_reason == "length" and self.config.explain_length_cut:
            limit = self.config.max_tokens_per_call
            at = f"the limit of {limit} tokens per reply" if limit else "the server's token limit"
            return (f"Format error: your reply was cut at {at} before it was complete, so nothing ran. "
                    "Write shorter replies: split the work over several calls (the kernel keeps variables "
                    "between calls), and do not repeat data or code that an earlier call already defined.")
        hint = (" (Your reply was cut where you began writing a result yourself (a <tool_response> or "
                "```output block): results come only from the harness, after your call.)") if cut else ""
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

    def _observe(self, res: AgentResult, call: Call, text: str) -> None:
        if self.native:
            res.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        else:
            res.messages.append(
                {"role": "user", "content": f"<tool_response name=\"{call.tool.name}\">\n{text}\n</tool_response>"}
            )

    def _save(self, res: AgentResult) -> None:
        if self.run_dir is None:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / f"{self.name}.trajectory.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"summary": res.summary(), "messages": res.messages}, indent=1,
                                  ensure_ascii=False, default=str))
        tmp.replace(path)


def _calls_key(calls: list[Call]) -> str:
    """What makes two replies send the same calls (surrounding whitespace in string arguments aside)."""
    return json.dumps([(c.tool.name, {k: v.strip() if isinstance(v, str) else v for k, v in c.arguments.items()})
                       for c in calls], sort_keys=True, default=str)


def forget_note(times: int, result: str) -> str:
    """What the model reads instead of a call it sent `times` times (see AgentConfig.forget_repeats)."""
    lines = [x for x in result.replace("</tool_response>", "").splitlines() if x.strip()]
    return (f"[You sent the same call {times} times; the last time it ran, its result ended with: "
            f"{lines[-1].strip()[:300] if lines else '(no output)'}\nIt has been taken out of this conversation "
            "and was not run again; what it defined still exists. Write a different call that avoids that result.]")


def cut_invented_response(text: str) -> tuple[str, bool]:
    """The reply up to a tool response the model wrote itself (True if one was cut), with a code fence
    left open closed again (a reply cut short by max_tokens is not passed here: its code is unfinished)."""
    k = min((i for i in (text.find(m) for m in INVENTED_RESULT_MARKERS) if i >= 0), default=-1)
    cut = k >= 0
    if cut:
        text = text[:k]
    lines = text.splitlines()
    fences = [i for i, line in enumerate(lines) if line.lstrip().startswith("```")]
    if len(fences) % 2:
        if "".join(lines[fences[-1] + 1:]).strip():
            text = text.rstrip() + "\n```"
        else:  # an empty block (the model opened a fence and began a tool response): nothing to run
            text = "\n".join(lines[:fences[-1]])
    return text, cut


def _signature(comp: Completion) -> str:
    """What makes two replies the same: the text and the tool calls, ignoring surrounding whitespace."""
    return json.dumps([(comp.content or "").strip(), [(tc.name, tc.arguments) for tc in comp.tool_calls]])


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
