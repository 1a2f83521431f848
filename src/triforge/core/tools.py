"""Tools are typed Python functions; this module turns them into schemas and validates calls to them.

How a model's reply becomes calls (native tool calls or the text protocol) is the adapter's work
(`triforge.core.adapter`); `ToolSet.parse` and `ToolSet.text_protocol` are shortcuts to it.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from triforge.core.errors import FormatError
from triforge.core.llm import Completion, ToolCall


def _doc_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    summary_lines, params, in_args, current = [], {}, False, None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() in ("args:", "arguments:", "parameters:"):
            in_args = True
            continue
        if in_args:
            m = re.match(r"^(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", stripped)
            if m and not line.startswith("        "):
                current = m.group(1)
                params[current] = m.group(3)
            elif stripped and current:
                params[current] += " " + stripped
            elif not stripped:
                in_args = False
        else:
            summary_lines.append(line)
    return "\n".join(summary_lines).strip(), params


@dataclass
class Tool:
    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]

    @classmethod
    def from_function(cls, fn: Callable[..., Any], name: str | None = None) -> Tool:
        summary, arg_docs = _doc_parts(fn)
        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        for pname, p in inspect.signature(fn).parameters.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            ann = hints.get(pname, str)
            default = ... if p.default is inspect.Parameter.empty else p.default
            from pydantic import Field

            fields[pname] = (ann, Field(default, description=arg_docs.get(pname)))
        model = create_model(
            f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid", strict=False), **fields
        )
        return cls(name=name or fn.__name__, description=summary or fn.__name__, fn=fn, args_model=model)

    def json_schema(self) -> dict[str, Any]:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.json_schema()},
        }

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            parsed = self.args_model.model_validate(arguments)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}" for err in e.errors()
            )
            raise FormatError(f"bad arguments for tool {self.name!r}: {problems}") from None
        return {k: getattr(parsed, k) for k in self.args_model.model_fields}

    def __call__(self, **kwargs: Any) -> Any:
        return self.fn(**kwargs)


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None):
    """Decorator: `@tool` or `@tool(name="...")` turns a typed function into a `Tool`."""
    if fn is None:
        return lambda f: Tool.from_function(f, name)
    return Tool.from_function(fn, name)


@dataclass
class Call:
    """A validated call to a known tool."""

    id: str
    tool: Tool
    arguments: dict[str, Any]
    raw_arguments: str


class ToolSet:
    def __init__(self, tools: list[Tool | Callable[..., Any]], *, code_tool: str | None = None) -> None:
        """`code_tool`: in the text protocol, a plain ```python block is a call to this tool (its `code`).

        Small models write code in fences far more reliably than code escaped inside JSON; any tool whose
        only argument is `code` can also be called with a block fenced as ```TOOL_NAME.
        """
        self.tools: dict[str, Tool] = {}
        for t in tools:
            t = t if isinstance(t, Tool) else Tool.from_function(t)
            self.tools[t.name] = t
        self.code_tools = [n for n, t in self.tools.items() if set(t.json_schema()["properties"]) == {"code"}]
        if code_tool is not None and code_tool not in self.code_tools:
            raise ValueError(f"code_tool {code_tool!r} is not a tool whose only argument is `code`")
        self.code_tool = code_tool

    def schemas(self) -> list[dict[str, Any]]:
        return [t.openai_schema() for t in self.tools.values()]

    def text_protocol(self) -> str:
        """Instructions for models without native tool calls (`triforge.core.adapter.text_protocol`)."""
        from triforge.core.adapter import text_protocol

        return text_protocol(self)

    def parse(self, comp: Completion, *, native: bool) -> list[Call]:
        """The calls in a reply, or FormatError saying what is wrong (`triforge.core.adapter.parse_calls`)."""
        from triforge.core.adapter import parse_calls

        return parse_calls(self, comp, native=native)

    def recover_leaked(self, content: str | None) -> list[Call] | None:
        """Calls leaked into content, only if the whole content is calls to known tools."""
        from triforge.core.adapter import recover_leaked

        return recover_leaked(self, content)

    def make_call(self, call_id: str, name: str, args: Any) -> Call:
        """A validated call to a known tool; `args` is a JSON object or its text."""
        if name not in self.tools:
            known = ", ".join(self.tools)
            raise FormatError(f"unknown tool {name!r}; the tools are: {known}")
        raw = args if isinstance(args, str) else json.dumps(args)
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as e:
                raise FormatError(f"arguments of tool {name!r} are not valid JSON ({e.msg} at char {e.pos})") from None
        if not isinstance(args, dict):
            raise FormatError(f"arguments of tool {name!r} must be a JSON object, got {type(args).__name__}")
        return Call(call_id, self.tools[name], self.tools[name].validate(args), raw)


def tool_calls_for(calls: list[Call]) -> list[ToolCall]:
    return [ToolCall(c.id, c.tool.name, c.raw_arguments) for c in calls]


def cap_text(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and tail of `text` within `limit` characters, with a marker saying how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text, False
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}", True
