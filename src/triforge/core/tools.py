"""Tools are typed Python functions; this module turns them into schemas and model replies into calls.

Two ways for a model to call a tool:

* native tool calls, where the model profile has them (`native_tools = true`);
* the text protocol otherwise: the reply contains one or more blocks

      <tool_call>
      {"name": "TOOL_NAME", "arguments": {"ARG": VALUE}}
      </tool_call>

  and text outside the blocks is the model's reasoning.

Local servers sometimes leak a native call into the message content as JSON; such content is
recovered as calls only when the whole content parses as calls to known tools.
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


def _call_name(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function")
    name = fn.get("name") if isinstance(fn, dict) else obj.get("name")
    return name if isinstance(name, str) else None


@dataclass
class Call:
    """A validated call to a known tool."""

    id: str
    tool: Tool
    arguments: dict[str, Any]
    raw_arguments: str


_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCE = re.compile(r"^```(?:json|tool_call)?\s*(.*?)\s*```$", re.S)
# A closed fenced block: its tag (```python, ```submit ...) and body. An unclosed one (a reply cut off
# by its token cap) is not a call.
_CODE_BLOCK = re.compile(r"^```[ \t]*([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_PLAIN_PYTHON = ("python", "py", "python3", "ipython")


_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_DECODER = json.JSONDecoder()


def _block_spans(text: str) -> list[tuple[int, int, str]]:
    """Each <tool_call> block as (start, end, the text inside it). The JSON is read whole first, so a string
    argument that holds `</tool_call>` (code that prints the protocol, say) does not end its block early."""
    spans, pos = [], 0
    while (start := text.find(_OPEN, pos)) >= 0:
        body = len(text) - len(text[start + len(_OPEN):].lstrip())
        try:
            end = _DECODER.raw_decode(text, body)[1]
            rest = text[end:].lstrip()
        except json.JSONDecodeError:
            rest = None
        if rest is not None and (not rest or rest.startswith(_CLOSE)):
            pos = len(text) - len(rest) + (len(_CLOSE) if rest else 0)
            spans.append((start, pos, text[body:end]))
        else:  # not one JSON value: the block as written, up to its closing tag, for the error message
            m = _BLOCK.match(text, start)
            assert m is not None
            pos = m.end()
            spans.append((start, pos, m.group(1)))
    return spans


def _call_blocks(text: str) -> list[str]:
    return [body for _, _, body in _block_spans(text)]


def _without_blocks(text: str) -> str:
    """The text outside every <tool_call> block."""
    kept, pos = [], 0
    for start, end, _ in _block_spans(text):
        kept.append(text[pos:start])
        pos = end
    return "".join(kept) + text[pos:]


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
        """Instructions for models without native tool calls."""
        lines = [
            "You can call tools. To call one, write a block exactly like this (JSON inside):",
            "<tool_call>",
            '{"name": "TOOL_NAME", "arguments": {"ARGUMENT": "VALUE"}}',
            "</tool_call>",
            "Write your reasoning before the block. Available tools:",
        ]
        for t in self.tools.values():
            lines.append(f"- {t.name}: {t.description}\n  arguments (JSON schema): {json.dumps(t.json_schema())}")
        if self.code_tool:
            lines += [
                "",
                f"Code needs no JSON: a reply with a fenced ```python block calls {self.code_tool} with that code.",
                *(f"A block fenced as ```{n} calls {n} with its code." for n in self.code_tools if n != self.code_tool),
            ]
        return "\n".join(lines)

    def fenced_calls(self, text: str) -> list[Call]:
        """Calls written as fenced code blocks (only for tools that take just `code`); [] when none."""
        calls: list[Call] = []
        plain: list[str] = []
        for tag, body in _CODE_BLOCK.findall(text):
            if tag in self.code_tools:
                calls.append(self._make_call(f"fence_{len(calls)}", tag, {"code": body}))
            elif self.code_tool and tag.lower() in _PLAIN_PYTHON:
                plain.append(body)
        if plain and not calls:
            # Several plain blocks in one reply are run together, in order (the kernel is persistent).
            calls.append(self._make_call("fence_0", self.code_tool or "", {"code": "\n".join(plain)}))
        return calls

    def _make_call(self, call_id: str, name: str, args: Any) -> Call:
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

    def _from_objects(self, objs: list[Any], prefix: str) -> list[Call]:
        calls = []
        for i, obj in enumerate(objs):
            if isinstance(obj, dict) and isinstance(obj.get("function"), dict):  # OpenAI-shaped, leaked as text
                obj = obj["function"]
            if not isinstance(obj, dict) or "name" not in obj:
                raise FormatError('each tool call must be a JSON object {"name": ..., "arguments": {...}}')
            args = obj.get("arguments", obj.get("parameters", {}))
            calls.append(self._make_call(f"{prefix}{i}", str(obj["name"]), args))
        return calls

    def recover_leaked(self, content: str | None) -> list[Call] | None:
        """Calls leaked into content, only if the whole content is calls to known tools."""
        if not content or not content.strip():
            return None
        text = content.strip()
        blocks = _call_blocks(text)
        if blocks and not _without_blocks(text).strip():
            pieces = blocks
        else:
            m = _FENCE.match(text)
            pieces = [m.group(1) if m else text]
        objs: list[Any] = []
        for piece in pieces:
            try:
                val = json.loads(piece)
            except json.JSONDecodeError:
                return None
            objs.extend(val if isinstance(val, list) else [val])
        if not objs or not all(_call_name(o) in self.tools for o in objs):
            return None
        try:
            return self._from_objects(objs, "leaked_")
        except FormatError:
            return None

    def parse(self, comp: Completion, *, native: bool) -> list[Call]:
        """The calls in a reply, or FormatError saying what is wrong with it."""
        if native and comp.tool_calls:
            return [self._make_call(tc.id, tc.name, tc.arguments) for tc in comp.tool_calls]
        if native:
            leaked = self.recover_leaked(comp.content)
            if leaked:
                return leaked
            raise FormatError(
                "your reply had no tool call; call one of the tools (" + ", ".join(self.tools) + ")"
            )
        text = comp.content or ""
        blocks = _call_blocks(text)
        if not blocks:
            leaked = self.recover_leaked(text) or self.fenced_calls(text)
            if leaked:
                return leaked
            if self.code_tool:
                raise FormatError(
                    f"your reply had no tool call; write a ```python block to run code with {self.code_tool}, "
                    'or a <tool_call> block: <tool_call>{"name": ..., "arguments": {...}}</tool_call>'
                )
            raise FormatError(
                "your reply had no <tool_call> block; end your reply with one, e.g.\n<tool_call>\n"
                '{"name": "' + next(iter(self.tools), "tool") + '", "arguments": {...}}\n</tool_call>'
            )
        objs = []
        for i, b in enumerate(blocks):
            try:
                objs.append(json.loads(b))
            except json.JSONDecodeError as e:
                if fenced := self.fenced_calls(_without_blocks(text)):
                    return fenced  # a broken JSON call beside a code block: the code block is the call
                raise FormatError(f"tool call block {i + 1} is not valid JSON ({e.msg} at char {e.pos})") from None
        return self._from_objects(objs, "text_")


def tool_calls_for(calls: list[Call]) -> list[ToolCall]:
    return [ToolCall(c.id, c.tool.name, c.raw_arguments) for c in calls]
