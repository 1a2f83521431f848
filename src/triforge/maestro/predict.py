"""The adapter of an `llm` node: builds its prompt from the node config and parses the reply.

Two reply formats: a JSON object keyed by output field (repaired when sloppy), or field markers
`<field>value</field>`. Each parser falls back on the other; a reply that neither can read raises
`ParseError`, which the executor records on the example.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import json_repair

from triforge.core.errors import FormatError
from triforge.core.llm import LLM
from triforge.maestro.nodes import LLMNode

REASONING = "reasoning"


class ParseError(FormatError):
    """A model reply from which the node's output fields cannot be read."""


@dataclass
class LLMCall:
    messages: list[dict[str, Any]]
    reply: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    error: str | None = None
    cached_input_tokens: int = 0  # part of input_tokens, priced at the cached-input price
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "reply": self.reply, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": self.cost_usd, "cached": self.cached,
                "error": self.error, "cached_input_tokens": self.cached_input_tokens}


def render_value(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(f"[{i}] {v}" for i, v in enumerate(value, 1)) or "(none)"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _field_lines(names: list[str], types: dict[str, str], descriptions: dict[str, str]) -> list[str]:
    out = []
    for n in names:
        desc = descriptions.get(n, "")
        out.append(f"- {n} ({types.get(n, 'str')})" + (f": {desc}" if desc else ""))
    return out


def output_names(node: LLMNode) -> list[str]:
    return ([REASONING] if node.reasoning else []) + list(node.outputs)


def format_outputs(node: LLMNode, values: dict[str, Any]) -> str:
    names = [n for n in output_names(node) if n in values]
    if node.format == "json":
        return json.dumps({n: values[n] for n in names}, ensure_ascii=False)
    return "\n".join(f"<{n}>\n{render_value(values[n])}\n</{n}>" for n in names)


def format_inputs(node: LLMNode, values: dict[str, Any]) -> str:
    return "\n\n".join(f"<{n}>\n{render_value(values.get(n, ''))}\n</{n}>" for n in node.inputs)


def build_messages(node: LLMNode, inputs: dict[str, Any], types: dict[str, str]) -> list[dict[str, Any]]:
    """System message (instruction, fields, reply format), demos as turns, then the inputs."""
    outs = output_names(node)
    descriptions = {REASONING: "think step by step before giving the outputs", **node.descriptions}
    types = {REASONING: "str", **types}
    if node.format == "json":
        how = ("Reply with one JSON object and nothing else, with exactly these keys: "
               + ", ".join(f'"{n}"' for n in outs) + ".")
    else:
        how = "Reply with each output between its markers, in this order: " + " ".join(
            f"<{n}>...</{n}>" for n in outs) + "."
    system = "\n".join([
        node.instruction.strip() or "Produce the outputs from the inputs.",
        "",
        "Inputs:", *_field_lines(list(node.inputs), types, descriptions),
        "Outputs:", *_field_lines(outs, types, descriptions),
        "",
        how,
    ])
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for demo in node.demos:
        messages.append({"role": "user", "content": format_inputs(node, demo)})
        messages.append({"role": "assistant", "content": format_outputs(node, demo)})
    messages.append({"role": "user", "content": format_inputs(node, inputs)})
    return messages


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def _json_object(text: str) -> dict[str, Any] | None:
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for c in candidates:
        try:
            obj = json.loads(c)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    if "{" not in text:
        return None
    try:
        obj = json_repair.loads(text)
    except Exception:  # json_repair raises assorted errors on hopeless input
        return None
    return obj if isinstance(obj, dict) else None


def _markers(text: str, names: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    alternation = "|".join(re.escape(n) for n in names)
    opens = list(re.finditer(rf"<({alternation})>", text))
    for i, m in enumerate(opens):
        name = m.group(1)
        if name in found:
            continue
        stop = text.find(f"</{name}>", m.end())
        nxt = opens[i + 1].start() if i + 1 < len(opens) else len(text)
        end = stop if 0 <= stop <= nxt else nxt
        found[name] = text[m.end():end].strip()
    return found


_BULLET = re.compile(r"^\s*(?:\[\d+\]|\d+[.)]|[-*•])\s*")


def coerce(value: Any, type_: str, name: str) -> Any:
    """Turn a parsed value into the field's type, or raise ParseError naming the field."""
    try:
        match type_:
            case "str":
                return value if isinstance(value, str) else (
                    json.dumps(value, ensure_ascii=False) if isinstance(value, list | dict) else str(value))
            case "int":
                if isinstance(value, bool):
                    raise ValueError
                return value if isinstance(value, int) else int(str(value).strip())
            case "float":
                if isinstance(value, bool):
                    raise ValueError
                return float(value) if isinstance(value, int | float) else float(str(value).strip())
            case "bool":
                if isinstance(value, bool):
                    return value
                s = str(value).strip().lower()
                if s in ("true", "yes", "1"):
                    return True
                if s in ("false", "no", "0"):
                    return False
                raise ValueError
            case "list[str]":
                if isinstance(value, list):
                    return [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in value]
                s = str(value).strip()
                if s.startswith("["):
                    try:
                        return coerce(json.loads(s), type_, name)
                    except json.JSONDecodeError:
                        pass
                return [_BULLET.sub("", line).strip() for line in s.splitlines() if line.strip()]
            case _:
                if isinstance(value, str):
                    try:
                        return json.loads(value)
                    except json.JSONDecodeError:
                        return value
                return value
    except (TypeError, ValueError):
        raise ParseError(f"field {name!r}: cannot read {str(value)[:80]!r} as {type_}") from None


def parse_reply(text: str | None, node: LLMNode, types: dict[str, str]) -> dict[str, Any]:
    """The node's outputs (by node-local name) from a reply; ParseError when fields are missing."""
    names = output_names(node)
    text = text or ""
    attempts = ("json", "markers") if node.format == "json" else ("markers", "json")
    best: dict[str, Any] = {}
    for how in attempts:
        got = (_json_object(text) or {}) if how == "json" else _markers(text, names)
        if all(n in got for n in node.outputs):
            best = got
            break
        if len(got) > len(best):
            best = got
    missing = [n for n in node.outputs if n not in best]
    if missing:
        raise ParseError(f"reply lacks output field(s) {missing} ({node.format} format): {text[:160]!r}")
    return {n: coerce(best[n], types.get(n, "str"), n) for n in node.outputs}


def predict(node: LLMNode, inputs: dict[str, Any], llm: LLM, types: dict[str, str], *,
            sample: int = 0) -> tuple[dict[str, Any], LLMCall]:
    """One call of an llm node: outputs by node-local name, and the call record.

    `types` maps node-local field names to state types. The call record is filled in before any
    ParseError is raised, so the executor can keep it.
    """
    messages = build_messages(node, inputs, types)
    call = LLMCall(messages=messages)
    try:
        comp = llm.complete(messages, temperature=node.temperature, max_tokens=node.max_tokens,
                            json_mode=node.format == "json", sample=sample)
    except Exception as e:
        call.error = f"{type(e).__name__}: {e}"
        e.llm_call = call  # type: ignore[attr-defined]
        raise
    call.reply, call.cached, call.cost_usd = comp.content, comp.cached, comp.cost_usd
    call.input_tokens, call.output_tokens = comp.usage.input_tokens, comp.usage.output_tokens
    call.cached_input_tokens = comp.usage.cached_input_tokens
    try:
        return parse_reply(comp.content, node, types), call
    except ParseError as e:
        call.error = str(e)
        e.llm_call = call  # type: ignore[attr-defined]
        raise
