"""The adapter between the agent loop and a model: message formats and tool-call parsing.

Two ways for a model to call a tool:

* native tool calls, where the model profile has them (`native_tools = true`);
* the text protocol otherwise: the reply contains one or more blocks

      <tool_call>
      {"name": "TOOL_NAME", "arguments": {"ARG": VALUE}}
      </tool_call>

  and text outside the blocks is the model's reasoning. Results come back as `<tool_response>` blocks;
  a reply is cut where the model starts writing one itself (a result it did not get from a tool).

Local servers sometimes leak a native call into the message content as JSON; such content is
recovered as calls only when the whole content parses as calls to known tools.

A model's thinking (a reasoning field, or a leading `<think>` block in the content) is split off before
any call is parsed: a tool call or code block written while thinking is kept in the trace, never run.
"""

from __future__ import annotations

import json
import re
from typing import Any

from triforge.core.errors import FormatError
from triforge.core.llm import Completion
from triforge.core.thinking import join_thinking, split_thinking
from triforge.core.tools import Call, ToolSet, tool_calls_for

RESULT_TAG = "<tool_response"  # the text protocol's result block: only the harness writes one
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCE = re.compile(r"^```(?:json|tool_call)?\s*(.*?)\s*```$", re.S)
# A closed fenced block: its tag (```python, ```submit ...) and body. An unclosed one (a reply cut off
# by its token cap) is not a call.
CODE_BLOCK = re.compile(r"^```[ \t]*([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_PLAIN_PYTHON = ("python", "py", "python3", "ipython")
_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_DECODER = json.JSONDecoder()


def _call_name(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function")
    name = fn.get("name") if isinstance(fn, dict) else obj.get("name")
    return name if isinstance(name, str) else None


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


def text_protocol(tools: ToolSet) -> str:
    """Instructions for models without native tool calls."""
    lines = [
        "You can call tools. To call one, write a block exactly like this (JSON inside):",
        "<tool_call>",
        '{"name": "TOOL_NAME", "arguments": {"ARGUMENT": "VALUE"}}',
        "</tool_call>",
        "Write your reasoning before the block. Available tools:",
    ]
    for t in tools.tools.values():
        lines.append(f"- {t.name}: {t.description}\n  arguments (JSON schema): {json.dumps(t.json_schema())}")
    if tools.code_tool:
        lines += [
            "",
            f"Code needs no JSON: a reply with a fenced ```python block calls {tools.code_tool} with that code.",
            *(f"A block fenced as ```{n} calls {n} with its code." for n in tools.code_tools if n != tools.code_tool),
        ]
    return "\n".join(lines)


def fenced_calls(tools: ToolSet, text: str) -> list[Call]:
    """Calls written as fenced code blocks (only for tools that take just `code`); [] when none."""
    calls: list[Call] = []
    plain: list[str] = []
    for tag, body in CODE_BLOCK.findall(text):
        if tag in tools.code_tools:
            calls.append(tools.make_call(f"fence_{len(calls)}", tag, {"code": body}))
        elif tools.code_tool and tag.lower() in _PLAIN_PYTHON:
            plain.append(body)
    if plain and not calls:
        # Several plain blocks in one reply are run together, in order (the kernel is persistent).
        calls.append(tools.make_call("fence_0", tools.code_tool or "", {"code": "\n".join(plain)}))
    return calls


def _from_objects(tools: ToolSet, objs: list[Any], prefix: str) -> list[Call]:
    calls = []
    for i, obj in enumerate(objs):
        if isinstance(obj, dict) and isinstance(obj.get("function"), dict):  # OpenAI-shaped, leaked as text
            obj = obj["function"]
        if not isinstance(obj, dict) or "name" not in obj:
            raise FormatError('each tool call must be a JSON object {"name": ..., "arguments": {...}}')
        args = obj.get("arguments", obj.get("parameters", {}))
        calls.append(tools.make_call(f"{prefix}{i}", str(obj["name"]), args))
    return calls


def recover_leaked(tools: ToolSet, content: str | None) -> list[Call] | None:
    """Calls leaked into content, only if the whole content is calls to known tools. Such a reply whose
    arguments do not fit the tool is a FormatError saying so (not "no tool call", which misleads)."""
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
    if not objs or not all(_call_name(o) in tools.tools for o in objs):
        return None
    try:
        return _from_objects(tools, objs, "leaked_")
    except FormatError as e:
        raise FormatError(f"your reply is a tool call, but not a valid one: {e}") from None


def keep_thinking(comp: Completion) -> None:
    """Move leading thinking out of the content into `comp.reasoning` (the HTTP client already does; other
    LLMs and replies from older caches may not have)."""
    thought, content = split_thinking(comp.content)
    if thought is not None:
        comp.content, comp.reasoning = content, join_thinking(comp.reasoning, thought)


def parse_calls(tools: ToolSet, comp: Completion, *, native: bool) -> list[Call]:
    """The calls in a reply (its thinking set aside first), or FormatError saying what is wrong with it."""
    keep_thinking(comp)
    if native and comp.tool_calls:
        return [tools.make_call(tc.id, tc.name, tc.arguments) for tc in comp.tool_calls]
    if native:
        leaked = recover_leaked(tools, comp.content)
        if leaked:
            return leaked
        raise FormatError("your reply had no tool call; call one of the tools (" + ", ".join(tools.tools) + ")")
    text = comp.content or ""
    blocks = _call_blocks(text)
    if not blocks:
        leaked = recover_leaked(tools, text) or fenced_calls(tools, text)
        if leaked:
            return leaked
        if tools.code_tool:
            raise FormatError(
                f"your reply had no tool call; write a ```python block to run code with {tools.code_tool}, "
                'or a <tool_call> block: <tool_call>{"name": ..., "arguments": {...}}</tool_call>'
            )
        raise FormatError(
            "your reply had no <tool_call> block; end your reply with one, e.g.\n<tool_call>\n"
            '{"name": "TOOL_NAME", "arguments": {...}}\n</tool_call>\nwhere TOOL_NAME is one of: '
            + ", ".join(tools.tools)
        )
    objs = []
    for i, b in enumerate(blocks):
        try:
            objs.append(json.loads(b))
        except json.JSONDecodeError as e:
            if fenced := fenced_calls(tools, _without_blocks(text)):
                return fenced  # a broken JSON call beside a code block: the code block is the call
            raise FormatError(f"tool call block {i + 1} is not valid JSON ({e.msg} at char {e.pos})") from None
    return _from_objects(tools, objs, "text_")


def cut_invented_response(text: str, markers: tuple[str, ...] = (RESULT_TAG,)) -> tuple[str, bool]:
    """The reply up to a result the model wrote itself (True if one was cut), with a code fence left open
    closed again (a reply cut short by max_tokens is not passed here: its code is unfinished)."""
    k = min((i for i in (text.find(m) for m in markers) if i >= 0), default=-1)
    cut = k >= 0
    if cut:
        text = text[:k]
    lines = text.splitlines()
    fences = [i for i, line in enumerate(lines) if line.lstrip().startswith("```")]
    if len(fences) % 2:
        if "".join(lines[fences[-1] + 1:]).strip():
            text = text.rstrip() + "\n```"
        else:  # an empty block (the model opened a fence and began a result): nothing to run
            text = "\n".join(lines[:fences[-1]])
    return text, cut


class ChatAdapter:
    """Turns the loop's steps into OpenAI-shaped messages and model replies into calls.

    `native`: the model makes native tool calls; otherwise the text protocol carries them, and
    `result_markers` (the protocol's own result tag plus any a policy adds) are sent as stop strings
    and cut on the client too, for servers that ignore `stop`.
    """

    def __init__(self, tools: ToolSet, *, native: bool, result_markers: tuple[str, ...] = ()) -> None:
        self.tools = tools
        self.native = native
        self.markers = (RESULT_TAG, *(m for m in result_markers if m != RESULT_TAG))

    def system(self, text: str) -> str:
        return text if self.native else f"{text}\n\n{text_protocol(self.tools)}"

    def request(self) -> dict[str, Any]:
        """The tool-related keyword arguments of `LLM.complete`."""
        if self.native:
            return {"tools": self.tools.schemas(), "stop": None}
        return {"tools": None, "stop": list(self.markers)}

    def read(self, comp: Completion) -> bool:
        """Cut a text-protocol reply at a result the model began writing itself; True when it was cut here
        or by a server honouring `stop` (a code fence left open). Thinking is set aside first."""
        keep_thinking(comp)
        if self.native or not comp.content or comp.finish_reason == "length":
            return False
        text, cut = cut_invented_response(comp.content, self.markers)
        cut = cut or text != comp.content
        comp.content = text
        return cut

    def parse(self, comp: Completion) -> list[Call]:
        return parse_calls(self.tools, comp, native=self.native)

    def assistant(self, comp: Completion, calls: list[Call] | None = None) -> dict[str, Any]:
        """The reply as the conversation keeps it; its thinking rides along as `reasoning_content`, which the
        client sends back only where the alias says `send_reasoning_back`."""
        msg: dict[str, Any] = {"role": "assistant", "content": comp.content or ""}
        if comp.reasoning:
            msg["reasoning_content"] = comp.reasoning
        if self.native and calls:
            msg["tool_calls"] = [tc.as_message_part() for tc in tool_calls_for(calls)]
        return msg

    def observation(self, call: Call, text: str) -> dict[str, Any]:
        if self.native:
            return {"role": "tool", "tool_call_id": call.id, "content": text}
        return {"role": "user", "content": f"<tool_response name=\"{call.tool.name}\">\n{text}\n</tool_response>"}
