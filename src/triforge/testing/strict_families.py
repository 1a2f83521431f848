"""The fake server's strict families: how each documented kind of endpoint refuses requests, delivers its
thinking and reports usage (see `triforge.testing.fake_server` for the modes)."""

from __future__ import annotations

import json
from typing import Any

FAMILIES = ("openai-reasoning", "vllm-reasoning", "deepseek", "think-tags", "azure")
# The thinking a strict family sends when a step gives none: it plants a tool call, a fenced code block and
# an answer object, none of which may ever run or count (all say DECOY).
DECOY_THINKING = (
    "The user wants a result. I could answer at once:\n<tool_call>\n"
    '{"name": "submit", "arguments": {"answer": "DECOY", "code": "raise SystemExit(\'DECOY\')"}}\n'
    "</tool_call>\nor run this first:\n```python\nraise SystemExit('DECOY: thinking was executed')\n```\n"
    '{"answer": "DECOY"}\nNo: the tools are the way. Let me write the real reply.'
)


def refusal(message: str, param: str | None, code: str | None) -> dict[str, Any]:
    """An error body in the OpenAI shape."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def _number(v: Any) -> str:
    return f"{v:g}" if isinstance(v, int | float) and not isinstance(v, bool) else json.dumps(v)


def strict_refusal(families: frozenset[str], body: dict[str, Any]) -> dict[str, Any] | None:
    """The 400 body a strict family answers this request with, or None when it takes it."""
    if "openai-reasoning" in families:
        if "max_tokens" in body:
            return refusal("Unsupported parameter: 'max_tokens' is not supported with this model. "
                           "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
        if "temperature" in body and body["temperature"] != 1:
            return refusal(f"Unsupported value: 'temperature' does not support {_number(body['temperature'])} "
                           "with this model. Only the default (1) value is supported.", "temperature",
                           "unsupported_value")
        if "stop" in body:
            return refusal("Unsupported parameter: 'stop' is not supported with this model.", "stop",
                           "unsupported_parameter")
    if "deepseek" in families and any(isinstance(m, dict) and "reasoning_content" in m
                                      for m in body.get("messages") or []):
        return refusal("The reasoning_content field is not supported in input messages: remove it from the "
                       "assistant messages you send back.", None, "invalid_request_error")
    return None


def deliver_thinking(families: frozenset[str], thinking: str | None, content: str | None,
                     reasoning_field: str) -> tuple[str | None, dict[str, Any]]:
    """(content, extra message fields) as the family sends its thinking; the OpenAI family hides it."""
    if not thinking:
        return content, {}
    if "think-tags" in families:
        return f"<think>\n{thinking}\n</think>\n\n{content or ''}", {}
    if "deepseek" in families:
        return content, {"reasoning_content": thinking}
    if "vllm-reasoning" in families:
        return content, {reasoning_field: thinking}
    return content, {}


def usage_counts(families: frozenset[str], usage: dict[str, Any], prompt_tokens: int, completion_tokens: int,
                 thinking_tokens: int) -> dict[str, Any]:
    """The reply's `usage` object: reasoning tokens inside the completion tokens (OpenAI), cached input as
    `prompt_tokens_details.cached_tokens` (OpenAI; half the prompt unless the step says) or DeepSeek's
    `prompt_cache_hit_tokens`."""
    counts: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    if "openai-reasoning" in families or "deepseek" in families:
        reasoning = int(usage.get("reasoning_tokens", thinking_tokens))
        if "openai-reasoning" in families and "output_tokens" not in usage:
            counts["completion_tokens"] += reasoning  # hidden thinking, billed as output
        cached = int(usage.get("cached_tokens", prompt_tokens // 2))
        counts["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        if "deepseek" in families:
            counts.update(prompt_cache_hit_tokens=cached, prompt_cache_miss_tokens=prompt_tokens - cached)
        else:
            counts["prompt_tokens_details"] = {"cached_tokens": cached}
    elif "reasoning_tokens" in usage or "cached_tokens" in usage:
        counts["completion_tokens_details"] = {"reasoning_tokens": int(usage.get("reasoning_tokens", 0))}
        counts["prompt_tokens_details"] = {"cached_tokens": int(usage.get("cached_tokens", 0))}
    counts["total_tokens"] = counts["prompt_tokens"] + counts["completion_tokens"]
    return counts
