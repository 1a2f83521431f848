"""Spans for every LLM call, tool call and agent step, appended to `RUN_DIR/trace.jsonl` as they finish.

Attribute names follow the OpenTelemetry GenAI conventions (`gen_ai.request.model`,
`gen_ai.usage.input_tokens`, `gen_ai.tool.name`, ...). Secrets never reach the file.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from triforge.core.config import ModelConfig
    from triforge.core.llm import Completion

_current_span: ContextVar[str | None] = ContextVar("triforge_span", default=None)
_current_agent: ContextVar[str | None] = ContextVar("triforge_agent", default=None)

_SECRET_KEYS = re.compile(r"(authorization|api[_-]?key|secret|password|token$)", re.I)
_SECRET_VALUES = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,})")
MAX_TEXT = 20_000


def redact(value: Any) -> Any:
    """Remove API keys and authorization headers, at any depth."""
    if isinstance(value, dict):
        return {
            k: ("[redacted]" if isinstance(k, str) and _SECRET_KEYS.search(k) and "tokens" not in k else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        value = _SECRET_VALUES.sub("[redacted]", value)
        if len(value) > MAX_TEXT:
            value = value[:MAX_TEXT] + f"... [{len(value) - MAX_TEXT} characters cut]"
    return value


class Tracer:
    def __init__(self, run_dir: str | Path, trace_id: str | None = None) -> None:
        self.path = Path(run_dir) / "trace.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.trace_id = trace_id or uuid.uuid4().hex
        self._lock = threading.Lock()

    def emit(self, record: dict[str, Any]) -> None:
        line = json.dumps(redact(record), ensure_ascii=False, default=str)
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    def _record(self, name: str, kind: str, start: float, end: float, attrs: dict[str, Any], status: str,
                span_id: str | None = None, parent: str | None = None) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "span_id": span_id or uuid.uuid4().hex[:16],
            "parent_id": parent if parent is not None else _current_span.get(),
            "name": name,
            "kind": kind,
            "start": start,
            "end": end,
            "duration_s": round(end - start, 6),
            "agent": _current_agent.get(),
            "status": status,
            "attributes": attrs,
        }

    @contextlib.contextmanager
    def span(self, name: str, kind: str = "internal", **attrs: Any) -> Iterator[dict[str, Any]]:
        """A span around a block; the block may add attributes to the yielded dict."""
        span_id = uuid.uuid4().hex[:16]
        parent = _current_span.get()
        token = _current_span.set(span_id)
        start = time.time()
        status = "ok"
        try:
            yield attrs
        except BaseException as e:
            status = f"error: {type(e).__name__}: {str(e)[:300]}"
            raise
        finally:
            _current_span.reset(token)
            self.emit(self._record(name, kind, start, time.time(), attrs, status, span_id, parent))

    def llm_span(self, alias: str, cfg: ModelConfig, body: dict[str, Any], comp: Completion,
                 duration_s: float, attempts: int) -> None:
        end = time.time()
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai_compatible",
            "gen_ai.request.model": cfg.model,
            "triforge.model_alias": alias,
            "server.address": cfg.base_url,
            "gen_ai.request.temperature": body.get("temperature"),
            "gen_ai.request.max_tokens": body.get("max_tokens"),
            "gen_ai.response.model": comp.model,
            "gen_ai.response.finish_reasons": [comp.finish_reason],
            "gen_ai.usage.input_tokens": comp.usage.input_tokens,
            "gen_ai.usage.output_tokens": comp.usage.output_tokens,
            "triforge.cost_usd": comp.cost_usd,
            "triforge.cached": comp.cached,
            "triforge.attempts": attempts,
            "gen_ai.input.messages": body.get("messages"),
            "gen_ai.output.messages": [comp.message()],
            "triforge.tools": [t.get("function", {}).get("name") for t in body.get("tools") or []],
        }
        self.emit(self._record(f"chat {cfg.model}", "llm", end - duration_s, end, attrs, "ok"))

    def tool_span(self, name: str, arguments: Any, result: str, duration_s: float, status: str = "ok",
                  call_id: str | None = None) -> None:
        end = time.time()
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": arguments,
            "gen_ai.tool.call.result": result,
        }
        self.emit(self._record(f"execute_tool {name}", "tool", end - duration_s, end, attrs, status))


@contextlib.contextmanager
def agent_scope(name: str) -> Iterator[None]:
    token = _current_agent.set(name)
    try:
        yield
    finally:
        _current_agent.reset(token)


def read_spans(run_dir: str | Path) -> list[dict[str, Any]]:
    """Spans of a run; a torn last line (crash mid-write) is skipped."""
    path = Path(run_dir) / "trace.jsonl"
    spans = []
    if not path.is_file():
        return spans
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            spans.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return spans
