"""A strict scripted model for tests: replies from a script, fails on surprises.

Each script step is one of:

* a string: a plain text reply;
* a dict: `{"content": ..., "tool_calls": [{"name": ..., "arguments": {...} or "raw json"}]}`;
* a callable `(messages, tools) -> str | dict`: a reply computed from what the agent sent.

A call past the end of the script raises `ScriptError`; `assert_done()` fails if steps are left.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from triforge.core import context
from triforge.core.config import ModelConfig
from triforge.core.llm import Completion, ToolCall, Usage

Step = str | dict[str, Any] | Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], Any]


class ScriptError(AssertionError):
    pass


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """A script step that calls one tool."""
    return {"content": "", "tool_calls": [{"name": name, "arguments": arguments}]}


def to_completion(step: str | dict[str, Any], index: int, model: str) -> Completion:
    if isinstance(step, str):
        step = {"content": step}
    calls = []
    for j, tc in enumerate(step.get("tool_calls", [])):
        args = tc.get("arguments", {})
        calls.append(ToolCall(
            id=tc.get("id", f"call_{index}_{j}"),
            name=tc["name"],
            arguments=args if isinstance(args, str) else json.dumps(args),
        ))
    content = step.get("content")
    usage = step.get("usage") or {}
    return Completion(
        content=content,
        tool_calls=calls,
        usage=Usage(int(usage.get("input_tokens", 10)), int(usage.get("output_tokens", 5))),
        model=model,
        finish_reason=step.get("finish_reason") or ("tool_calls" if calls else "stop"),
    )


class ScriptedLLM:
    """An in-process LLM that plays back a script; same interface as the real client."""

    def __init__(self, script: list[Step], *, alias: str = "scripted", native_tools: bool = True,
                 price_in_per_mtok: float = 0.0, price_out_per_mtok: float = 0.0) -> None:
        self.alias = alias
        self.config = ModelConfig(model="scripted", base_url="scripted://", native_tools=native_tools,
                                  price_in_per_mtok=price_in_per_mtok, price_out_per_mtok=price_out_per_mtok)
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self._next = 0
        self._lock = threading.Lock()

    def complete(self, messages, *, tools=None, temperature=None, max_tokens=None, json_mode=False,
                 sample: int = 0, stop: list[str] | None = None) -> Completion:
        budget = context.budget()
        if budget is not None:
            budget.check()
        with self._lock:
            i = self._next
            if i >= len(self.script):
                last = messages[-1].get("content") if messages else None
                raise ScriptError(f"unexpected call #{i + 1}: the script has {len(self.script)} steps; "
                                  f"last message: {str(last)[:200]!r}")
            self._next += 1
            self.requests.append({"messages": [dict(m) for m in messages], "tools": tools,
                                  "temperature": temperature, "sample": sample, "stop": stop})
        step = self.script[i]
        if callable(step):
            step = step(messages, tools)
        comp = to_completion(step, i, self.config.model)
        if stop and comp.content:  # as a server does: the reply ends before the first stop string
            cut = min((k for k in (comp.content.find(x) for x in stop) if k >= 0), default=-1)
            if cut >= 0:
                comp.content, comp.finish_reason = comp.content[:cut], "stop"
        comp.cost_usd = self.config.cost_usd(comp.usage.input_tokens, comp.usage.output_tokens,
                                             comp.usage.cached_input_tokens)
        if budget is not None:
            budget.charge(input_tokens=comp.usage.input_tokens, output_tokens=comp.usage.output_tokens,
                          usd=comp.cost_usd)
        tracer = context.tracer()
        if tracer:
            tracer.llm_span(self.alias, self.config, {"messages": messages, "tools": tools}, comp, 0.0, attempts=1)
        return comp

    @property
    def remaining(self) -> int:
        return len(self.script) - self._next

    def assert_done(self) -> None:
        if self.remaining:
            raise ScriptError(f"{self.remaining} script steps were never used")
