"""The LLM seam: one Protocol, and an OpenAI-compatible client over the openai SDK.

The client only moves requests and counts usage; formatting and parsing belong to the adapter
(`triforge.core.adapter`), decisions to the agent loop (`triforge.core.react`).
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, runtime_checkable

import openai

from triforge.core import context
from triforge.core.cache import wire_request
from triforge.core.capabilities import (
    ADAPTABLE,
    PROCESS_LEARNED,
    Learned,
    apply_learned,
    capabilities,
    describe,
    error_text,
    read_refusal,
    shape_body,
    toml_hint,
)
from triforge.core.config import ModelConfig
from triforge.core.errors import EndpointError, LimitsExceeded
from triforge.core.thinking import join_thinking, split_thinking
from triforge.core.usage import Usage, field_of, read_usage

log = logging.getLogger("triforge.llm")


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model wrote it

    def as_message_part(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Completion:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None
    cost_usd: float = 0.0
    cached: bool = False
    reasoning: str | None = None  # the model's thinking, split from the content: kept, never acted on

    def message(self) -> dict[str, Any]:
        """The assistant message in OpenAI shape, safe to send back to any server.

        llama.cpp's server rejects `content: null`, so content is always a string. The thinking rides along
        as `reasoning_content`; the client strips it before sending unless the alias says
        `send_reasoning_back`.
        """
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.reasoning:
            msg["reasoning_content"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = [tc.as_message_part() for tc in self.tool_calls]
        return msg

    def to_dict(self) -> dict[str, Any]:
        u = self.usage
        return {
            "content": self.content,
            "tool_calls": [{"id": t.id, "name": t.name, "arguments": t.arguments} for t in self.tool_calls],
            "usage": {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                      "reasoning_tokens": u.reasoning_tokens, "cached_input_tokens": u.cached_input_tokens},
            "model": self.model,
            "finish_reason": self.finish_reason,
            **({"reasoning": self.reasoning} if self.reasoning else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Completion:
        return cls(
            content=d.get("content"),
            tool_calls=[ToolCall(**t) for t in d.get("tool_calls", [])],
            usage=Usage(**d.get("usage", {})),
            model=d.get("model", ""),
            finish_reason=d.get("finish_reason"),
            reasoning=d.get("reasoning"),
        )


@runtime_checkable
class LLM(Protocol):
    """Anything that turns messages into a completion."""

    alias: str
    config: ModelConfig

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        json_mode: bool = False,
        sample: int = 0,
        stop: list[str] | None = None,
    ) -> Completion: ...


class TransientReplyError(Exception):
    """A reply that arrived but cannot be used (empty choices); retried like a 5xx."""


class _Refused(Exception):
    """An HTTP 400, or the 422 some servers (TGI, gateways validating the body) answer instead: maybe a parameter
    the model does not take (`OpenAICompatLLM._send` decides)."""

    def __init__(self, error: openai.APIStatusError) -> None:
        super().__init__(str(error))
        self.error = error


def sanitize_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Shape messages so that strict servers accept them (null content becomes an empty string)."""
    out = []
    for m in messages:
        if m.get("content") is None and m.get("role") in ("assistant", "tool", "user", "system"):
            m = {**m, "content": ""}
        out.append(m)
    return out


def retry_after_seconds(headers: Any) -> float | None:
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) * scale)
        except ValueError:
            try:
                return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
            except (TypeError, ValueError):
                return None
    return None


_RETRYABLE = (
    openai.APIConnectionError,  # includes timeouts
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APIResponseValidationError,
    TransientReplyError,
    json.JSONDecodeError,
)


def _explain(alias: str, cfg: ModelConfig, e: Exception) -> str:
    where = f"model {alias!r} at {cfg.base_url}"
    if isinstance(e, openai.APITimeoutError):
        return f"{where}: no reply within {cfg.timeout_s:g} s; raise timeout_s or check the server"
    if isinstance(e, openai.APIConnectionError):
        return f"{where} is unreachable; start the server or fix base_url"
    if isinstance(e, openai.AuthenticationError):
        hint = f"check ${cfg.api_key_env}" if cfg.api_key_env else "set api_key_env for this alias"
        return f"{where} rejected the API key (401); {hint}"
    if isinstance(e, openai.NotFoundError):
        return f"{where}: endpoint or model {cfg.model!r} not found (404); check base_url (usually ends in /v1) and the model name"
    if isinstance(e, openai.APIStatusError):
        return f"{where} answered HTTP {e.status_code}: {error_text(e)[:300]}"
    return f"{where}: {type(e).__name__}: {str(e)[:200]}"


class OpenAICompatLLM:
    """An OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp server)."""

    def __init__(self, alias: str, config: ModelConfig, *, sleep=time.sleep, learned: Learned | None = None) -> None:
        self.alias = alias
        self.config = config
        self.capabilities = capabilities(config)
        self._sleep = sleep
        self._learned = learned or PROCESS_LEARNED
        key = "sk-no-key-needed"
        if config.api_key_env:
            key = os.environ.get(config.api_key_env, "")
            if not key:
                raise EndpointError(
                    f"model alias {alias!r} reads its API key from ${config.api_key_env}, which is not set; "
                    f"export {config.api_key_env}=..."
                )
        # Retries are ours (to count, trace and honour Retry-After the same way for every fault).
        if config.api_type == "azure":  # api-key header, api-version query, /openai/deployments/NAME path
            self._client: openai.OpenAI = openai.AzureOpenAI(
                azure_endpoint=config.base_url or "", azure_deployment=config.deployment or config.model,
                api_version=config.api_version, api_key=key, timeout=config.timeout_s, max_retries=0)
        else:
            self._client = openai.OpenAI(
                base_url=config.base_url, api_key=key, timeout=config.timeout_s, max_retries=0
            )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its settings: a task on another process or host opens its own client."""
        return (type(self), (self.alias, self.config))

    def close(self) -> None:
        """Release the HTTP connections (subclasses also stop what they own, e.g. a local server)."""
        self._client.close()

    def __enter__(self) -> OpenAICompatLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request_body(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        temperature: float | None,
        max_tokens: int | None,
        json_mode: bool,
        stop: list[str] | None = None,
    ) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {"model": cfg.model, "messages": sanitize_messages(messages)}
        if tools:
            body["tools"] = tools
        t = temperature if temperature is not None else cfg.temperature
        if t is not None:
            body["temperature"] = t
        mt = max_tokens or cfg.max_tokens
        if mt:
            body["max_tokens"] = mt
        if json_mode and cfg.json_mode:
            body["response_format"] = {"type": "json_object"}
        if stop:
            body["stop"] = list(stop)
        return shape_body(body, self.capabilities)

    def endpoint(self) -> str:
        """Where requests go, as the key of what was learned about it (an Azure deployment is its own)."""
        cfg = self.config
        return f"{cfg.base_url}#deployment={cfg.deployment or cfg.model}" if cfg.api_type == "azure" else str(cfg.base_url)

    def refused(self) -> dict[str, str]:
        """What the server refused so far in this process: parameter -> "drop" | "rename:NEW"."""
        return self._learned.rules(self.endpoint(), self.config.model)

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        json_mode: bool = False,
        sample: int = 0,
        stop: list[str] | None = None,
    ) -> Completion:
        body = self.request_body(messages, tools, temperature, max_tokens, json_mode, stop)
        cache_key = wire_request(body, base_url=self.config.base_url, extra_body=self.config.extra_body)
        budget, cache, tracer = context.budget(), context.cache(), context.tracer()
        if cache is not None and (hit := cache.get(cache_key, sample)) is not None:
            comp = Completion.from_dict(hit)
            comp.cached = True
            if tracer:
                tracer.llm_span(self.alias, self.config, body, comp, 0.0, attempts=0)
            return comp
        if budget is not None:
            budget.check()
        t0 = time.perf_counter()
        comp, attempts, sent = self._send(body)
        comp.cost_usd = self.config.cost_usd(comp.usage.input_tokens, comp.usage.output_tokens,
                                             comp.usage.cached_input_tokens)
        if budget is not None:
            u = comp.usage  # reasoning and cached tokens are parts of output and input: recorded, not added again
            budget.charge(input_tokens=u.input_tokens, output_tokens=u.output_tokens, usd=comp.cost_usd,
                          **{k: v for k, v in (("reasoning_tokens", u.reasoning_tokens),
                                               ("cached_input_tokens", u.cached_input_tokens)) if v})
        if cache is not None:
            cache.put(cache_key, comp.to_dict(), sample)
        if tracer:
            tracer.llm_span(self.alias, self.config, sent, comp, time.perf_counter() - t0, attempts=attempts,
                            adapted=self.refused())
        return comp

    def _send(self, body: dict[str, Any]) -> tuple[Completion, int, dict[str, Any]]:
        """Send the body with what was learned about the endpoint applied; a 400 refusing one parameter
        teaches one more adaptation and the call is sent again, at most once per parameter (never a loop)."""
        endpoint, model = self.endpoint(), self.config.model
        attempts = 0
        for _ in range(len(ADAPTABLE) + 1):
            rules = self._learned.rules(endpoint, model)
            sent = apply_learned(body, rules)
            try:
                comp, n = self._call_with_retries(sent)
                return comp, attempts + n, sent
            except _Refused as r:
                attempts += 1
                rule = read_refusal(r.error, sent, rules)
                if rule is None:
                    raise EndpointError(_explain(self.alias, self.config, r.error)) from r.error
                if self._learned.learn(endpoint, model, *rule):
                    self._announce(*rule, r.error)
        raise EndpointError(f"{_explain(self.alias, self.config, Exception('every parameter refused'))}")

    def _announce(self, param: str, action: str, error: openai.APIStatusError) -> None:
        """Once per endpoint, model and parameter: on the console and in the trace."""
        err = error.body if isinstance(error.body, dict) else {}
        code = f" {err['code']}" if err.get("code") else ""
        hint = toml_hint(param, action)
        line = (f"model {self.alias!r} at {self.config.base_url} refused {param!r} (HTTP {error.status_code}{code}); "
                f"{describe(param, action)} for the rest of this run"
                + (f" (declare {hint} in [models.{self.alias}] to skip the refused request)" if hint else ""))
        log.warning("triforge: %s", line)
        if (tracer := context.tracer()) is not None:
            tracer.event("llm.param_refused", **{
                "triforge.model_alias": self.alias, "server.address": self.config.base_url,
                "gen_ai.request.model": self.config.model, "triforge.refused_param": param,
                "triforge.adaptation": action, "error.type": str(err.get("code") or "400"),
                "error.message": error_text(error)[:300]})

    def _call_with_retries(self, body: dict[str, Any]) -> tuple[Completion, int]:
        limits = context.endpoint_limits()
        slot = limits.slot(self.config.base_url or "", self.config.max_concurrency) if limits else None
        attempt = 0
        while True:
            attempt += 1
            try:
                if slot is not None:
                    with slot:
                        return self._call_once(body), attempt
                return self._call_once(body), attempt
            except _RETRYABLE as e:
                if attempt > self.config.max_retries:
                    raise EndpointError(
                        f"{_explain(self.alias, self.config, e)} (gave up after {attempt} attempts)"
                    ) from e
                headers = getattr(getattr(e, "response", None), "headers", None)
                wait = retry_after_seconds(headers)
                if wait is None:
                    wait = min(0.5 * 2 ** (attempt - 1), 8.0) * (0.5 + random.random() / 2)
                self._sleep(min(wait, 60.0))
            except (openai.BadRequestError, openai.UnprocessableEntityError) as e:
                raise _Refused(e) from e
            except openai.APIStatusError as e:
                raise EndpointError(_explain(self.alias, self.config, e)) from e

    def _call_once(self, body: dict[str, Any]) -> Completion:
        extra = dict(self.config.extra_body)
        # A wall-time limit holds inside a call too: the request waits no longer than the time left.
        left = context.remaining_s()
        if left is not None and left <= 0:
            raise LimitsExceeded("wall-time limit reached before the model call")
        timeout = self.config.timeout_s if left is None else min(self.config.timeout_s, left)
        try:
            resp = self._client.chat.completions.create(**body, extra_body=extra or None, timeout=timeout)
        except openai.APITimeoutError as e:
            if left is not None and timeout >= left:
                raise LimitsExceeded(f"wall-time limit reached during a model call ({left:.1f} s were left)") from e
            raise
        if not getattr(resp, "choices", None):
            raise TransientReplyError("reply had no choices")
        choice = resp.choices[0]
        msg = choice.message
        calls = []
        for i, tc in enumerate(msg.tool_calls or []):
            fn = getattr(tc, "function", None)
            if fn is None:
                continue
            args = fn.arguments
            if not isinstance(args, str):  # some servers send an object instead of a JSON string
                args = json.dumps(args)
            calls.append(ToolCall(id=str(tc.id or f"call_{i}"), name=fn.name or "", arguments=args or "{}"))
        # Thinking arrives in a field (vLLM/SGLang reasoning parsers, DeepSeek: reasoning_content; newer
        # vLLM: reasoning) or at the start of the content (<think>...</think>); either way it is split off.
        field_thought = field_of(msg, "reasoning_content") or field_of(msg, "reasoning")
        tag_thought, content = split_thinking(msg.content)
        return Completion(
            content=content,
            tool_calls=calls,
            usage=read_usage(resp.usage),
            model=resp.model or self.config.model,
            finish_reason=choice.finish_reason,
            reasoning=join_thinking(field_thought if isinstance(field_thought, str) else None, tag_thought),
        )


def get_llm(
    alias: str | None = None,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    settings=None,
) -> LLM:
    """The LLM for an alias from config (or the default), with environment and CLI overrides applied.

    A config whose base_url has a registered provider's scheme gets that provider's client (`local://`:
    a `triforge.local.llm.LocalLLM`, which starts a llama.cpp server on first use); release any LLM from
    here with `close()` or a `with` block.
    """
    from triforge.core import providers
    from triforge.core.config import resolve_model

    name, cfg = resolve_model(alias, settings, base_url=base_url, api_key_env=api_key_env)
    if (provider := providers.for_base_url(cfg.base_url)) is not None:
        return provider.make_llm(name, cfg)
    return OpenAICompatLLM(name, cfg)
