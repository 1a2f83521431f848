"""Requests reshaped for llama-cpp-python's `chatml-function-calling` chat format (the `local` alias).

Found against the real server (llama-cpp-python 0.3.36, see docs/endpoints.md):

* without `tool_choice` the format ignores `tools` entirely and the model only chats: send `"auto"`;
* its prompt template has no branch for `role: tool`: a tool result is rendered as an empty
  `<|im_start|>tool` line, so the model never sees it: send results as user messages instead;
* tools are described only inside a system message, and only by name and parameter schema: make sure a
  system message exists and append each tool's description to it;
* `content: null` in an assistant message is sent as `""` (done for every endpoint by the core client).

Each function is pure (a new body; the input is not modified), so the response cache keys on the
reshaped request and a replay is exact.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_SYSTEM = "You are a helpful assistant."


def _tool_names_by_id(messages: list[dict[str, Any]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for m in messages:
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            if tc.get("id") and fn.get("name"):
                names[str(tc["id"])] = str(fn["name"])
    return names


def tool_result_as_user(message: dict[str, Any], name: str | None) -> dict[str, Any]:
    """A `role: tool` message as the user message the model can read."""
    content = message.get("content")
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False) if content is not None else ""
    head = f"Result of functions.{name}:" if name else "Function result:"
    return {"role": "user", "content": f"{head}\n{content}"}


def tool_descriptions(tools: list[dict[str, Any]]) -> str:
    lines = []
    for t in tools:
        fn = t.get("function") or {}
        if fn.get("name"):
            desc = " ".join(str(fn.get("description") or "").split())
            lines.append(f"- functions.{fn['name']}: {desc}" if desc else f"- functions.{fn['name']}")
    return "What the functions do:\n" + "\n".join(lines) if lines else ""


def adapt_chatml_function_calling(body: dict[str, Any]) -> dict[str, Any]:
    """The request reshaped so that llama-cpp-python's chatml-function-calling format handles it as intended."""
    out = dict(body)
    messages = list(body.get("messages") or [])
    names = _tool_names_by_id(messages)
    msgs = [tool_result_as_user(m, names.get(str(m.get("tool_call_id")))) if m.get("role") == "tool" else m
            for m in messages]
    tools = body.get("tools") or []
    if tools:
        out.setdefault("tool_choice", "auto")
        extra = tool_descriptions(tools)
        if not msgs or msgs[0].get("role") != "system":
            msgs.insert(0, {"role": "system", "content": DEFAULT_SYSTEM})
        if extra:
            first = msgs[0]
            msgs[0] = {**first, "content": f"{first.get('content') or ''}\n\n{extra}".lstrip()}
    out["messages"] = msgs
    return out
