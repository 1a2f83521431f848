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
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triforge.core.errors import Submitted

if TYPE_CHECKING:
    from triforge.core.config import ModelConfig
    from triforge.core.llm import Completion

_current_span: ContextVar[str | None] = ContextVar("triforge_span", default=None)
_current_agent: ContextVar[str | None] = ContextVar("triforge_agent", default=None)
# (event, record): event is "start" (a span opened; its record has no end yet) or "end" (written to the file).
SpanListener = Callable[[str, dict[str, Any]], None]
_listeners: ContextVar[tuple[SpanListener, ...]] = ContextVar("triforge_span_listeners", default=())

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
        _notify("end", record)

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
        _notify("start", {"span_id": span_id, "parent_id": parent, "name": name, "kind": kind, "start": start,
                          "agent": _current_agent.get(), "attributes": attrs})
        try:
            yield attrs
        except Submitted:  # handing in the answer ends a step successfully
            status = "submitted"
            raise
        except BaseException as e:
            status = f"error: {type(e).__name__}: {str(e)[:300]}"
            raise
        finally:
            _current_span.reset(token)
            self.emit(self._record(name, kind, start, time.time(), attrs, status, span_id, parent))

    def event(self, name: str, kind: str = "event", **attrs: Any) -> None:
        """A point in the run (a span of zero duration), such as the isolation its untrusted code gets."""
        now = time.time()
        self.emit(self._record(name, kind, now, now, attrs, "ok"))

    def llm_span(self, alias: str, cfg: ModelConfig, body: dict[str, Any], comp: Completion,
                 duration_s: float, attempts: int, adapted: dict[str, str] | None = None) -> None:
        """One call as sent (`body`, after any adaptation). Cached input tokens are part of the input tokens
        and reasoning tokens part of the output tokens, as the GenAI conventions define them."""
        end = time.time()
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai_compatible",
            "gen_ai.request.model": cfg.model,
            "triforge.model_alias": alias,
            "server.address": cfg.base_url,
            "gen_ai.request.temperature": body.get("temperature"),
            "gen_ai.request.max_tokens": body.get("max_tokens", body.get("max_completion_tokens")),
            "gen_ai.response.model": comp.model,
            "gen_ai.response.finish_reasons": [comp.finish_reason],
            "gen_ai.usage.input_tokens": comp.usage.input_tokens,
            "gen_ai.usage.output_tokens": comp.usage.output_tokens,
            "gen_ai.usage.reasoning.output_tokens": comp.usage.reasoning_tokens,
            "gen_ai.usage.cache_read.input_tokens": comp.usage.cached_input_tokens,
            "triforge.cost_usd": comp.cost_usd,
            "triforge.cached": comp.cached,
            "triforge.attempts": attempts,
            "gen_ai.input.messages": body.get("messages"),
            "gen_ai.output.messages": [comp.message()],
            "triforge.tools": [t.get("function", {}).get("name") for t in body.get("tools") or []],
        }
        if body.get("reasoning_effort"):
            attrs["gen_ai.request.reasoning_effort"] = body["reasoning_effort"]
        if adapted:
            attrs["triforge.adapted_params"] = dict(adapted)
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


def _notify(event: str, record: dict[str, Any]) -> None:
    for fn in _listeners.get():
        try:
            fn(event, record)
        except Exception:  # noqa: BLE001 - a display must never break the run it shows
            pass


@contextlib.contextmanager
def listening(fn: SpanListener) -> Iterator[None]:
    """Call `fn` for every span opened and finished in this context (worker threads of `pmap` included).

    Lets a caller watch a run from outside (progress lines) without touching the code that runs it.
    """
    token = _listeners.set((*_listeners.get(), fn))
    try:
        yield
    finally:
        _listeners.reset(token)


@contextlib.contextmanager
def agent_scope(name: str) -> Iterator[None]:
    token = _current_agent.set(name)
    try:
        yield
    finally:
        _current_agent.reset(token)


class CorruptTrace(ValueError):
    """A trace file with a line that is not a span (other than a torn last line)."""


def trace_path(run: str | Path) -> Path:
    """The trace file of a run: `RUN_DIR/trace.jsonl`, or the path itself when it names a file."""
    p = Path(run)
    return p if p.is_file() else p / "trace.jsonl"


def read_spans(run: str | Path, *, strict: bool = False, dropped: list[int] | None = None) -> list[dict[str, Any]]:
    """Spans of a run (its directory or its trace file); a torn last line (crash mid-write) is skipped.

    With `strict`, any other line that is not a span raises `CorruptTrace` naming the line; otherwise
    such lines are skipped. The numbers of skipped lines are appended to `dropped` when it is given.
    """
    path = trace_path(run)
    spans: list[dict[str, Any]] = []
    if not path.is_file():
        return spans
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        if strict:
            raise CorruptTrace(f"{path} is not UTF-8 text (byte {e.start})") from None
        return spans
    numbered = [(i, ln) for i, ln in enumerate(lines, 1) if ln.strip()]
    for k, (i, line) in enumerate(numbered):
        try:
            rec = json.loads(line)
            ok = isinstance(rec, dict) and isinstance(rec.get("kind"), str) and isinstance(rec.get("attributes", {}), dict)
        except json.JSONDecodeError:
            rec, ok = None, False
        if ok:
            spans.append(rec)
        elif strict and (k < len(numbered) - 1 or rec is not None or not spans):
            raise CorruptTrace(f"{path} line {i} is not a triforge span ({line[:60]!r})")
        elif dropped is not None:
            dropped.append(i)
    return spans
