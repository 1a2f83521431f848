"""Replies for a fake endpoint that fill whatever output fields a maestro `llm` node asks for.

Used by tests, the executor benchmark, and `examples/maestro/fake_reply.py` (for `triforge llm
serve-fake`), so `triforge maestro run` can be tried end to end without a model. The values are
placeholders: a query field repeats the question, other fields say which field they are.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FIELD = re.compile(r"^- (\w+) \(([\w\[\]]+)\)", re.M)
_INPUT = re.compile(r"<(\w+)>\n(.*?)\n</\1>", re.S)


def _value(name: str, type_: str, inputs: dict[str, str]) -> Any:
    if type_ == "list[str]":
        return [f"fake {name}"]
    if type_ == "bool":
        return True
    if type_ in ("int", "float"):
        return 0
    if "query" in name:
        return inputs.get("question") or inputs.get("query") or f"fake {name}"
    return f"fake {name}"


def reply_for(messages: list[dict[str, Any]]) -> str:
    """A reply in the format the node's system message asks for, with every output field filled."""
    system = str(messages[0].get("content", "")) if messages else ""
    user = str(messages[-1].get("content", "")) if messages else ""
    inputs = dict(_INPUT.findall(user))
    outputs_part = system.split("\nOutputs:\n", 1)[-1]
    fields = _FIELD.findall(outputs_part)
    values = {name: _value(name, t, inputs) for name, t in fields}
    if "exactly these keys" in system:
        return json.dumps(values)
    return "\n".join(f"<{k}>\n{v if not isinstance(v, list) else chr(10).join(v)}\n</{k}>" for k, v in values.items())


def reply(request: dict[str, Any]) -> str:
    """For `FakeOpenAIServer(reply)` and `triforge llm serve-fake --script`: request body -> reply."""
    return reply_for(request.get("messages", []))
