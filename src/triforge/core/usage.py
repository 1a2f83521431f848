"""Token usage of one call, read from any OpenAI-compatible reply (reasoning and cached input tokens too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Usage:
    """Tokens of one call. `input_tokens` includes the cached ones, `output_tokens` the reasoning ones (as
    OpenAI bills them), so a budget on output tokens counts the thinking once."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0


def field_of(obj: Any, name: str) -> Any:
    """A response field, typed by the SDK or only in its extras (fields of other servers)."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(name)
    return value


def read_usage(raw: Any) -> Usage:
    """Usage from a reply: reasoning tokens (`completion_tokens_details.reasoning_tokens`) and cached input
    tokens (`prompt_tokens_details.cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`) included."""
    if raw is None:
        return Usage()
    prompt, completion = int(field_of(raw, "prompt_tokens") or 0), int(field_of(raw, "completion_tokens") or 0)
    reasoning = int(field_of(field_of(raw, "completion_tokens_details"), "reasoning_tokens") or 0)
    cached = int(field_of(field_of(raw, "prompt_tokens_details"), "cached_tokens")
                 or field_of(raw, "prompt_cache_hit_tokens") or 0)
    # OpenAI's completion_tokens include the reasoning; a server reporting more reasoning than completion
    # tokens counted it apart, so it is added (billed as output either way, never twice).
    output = completion if reasoning <= completion else completion + reasoning
    return Usage(prompt, output, reasoning, min(cached, prompt))
