"""A fake OpenAI-compatible server on loopback, driven by a script, with injectable faults.

Serves `POST /v1/chat/completions` (plain and streamed) and `GET /v1/models`. The script is a list
of steps or a function `(request_body) -> step`; one step answers one request. A step is a string
(a text reply) or a dict with these keys, all optional:

* `content`: the reply text;
* `tool_calls`: a list of calls, each `{"name": ..., "arguments": {...}}` (arguments as a dict or a
  JSON string), or in the OpenAI shape `{"id": ..., "type": "function", "function": {"name": ...,
  "arguments": "..."}}`;
* `fault`: one of `429` (with `retry_after` seconds), any other HTTP status such as `500` or `401`,
  `slow` (sleeps `delay_s`, default 30, past the client's timeout), `truncated` (a 200 reply whose
  JSON is cut off), `leak` (the tool calls are written into `content` as JSON instead of
  `tool_calls`), `empty_choices`;
* `delay_s`: seconds to wait before replying;
* `finish_reason`: reported as given (`length`: a reply cut at `max_tokens`, as llama.cpp reports it);
* `usage`: `{"input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens"}`;
* `reasoning`: the model's thinking, delivered as the strict family delivers it (default: `DECOY_THINKING`).

`strict` makes the server behave as one documented family of endpoints (several join with `+`, e.g.
`"azure+openai-reasoning"`); a refused request gets HTTP 400 with the family's own error body and does not
use up a script step (it is kept in `refused`):

* `openai-reasoning` (GPT-5, o-series): refuses `max_tokens`, a `temperature` other than 1 and `stop` with
  the bodies the OpenAI API sends; reports `reasoning_tokens` (inside `completion_tokens`) and
  `cached_tokens` (half the prompt, unless the step says); the thinking itself is hidden;
* `vllm-reasoning`: the thinking in the message field `reasoning_field` (`reasoning_content`; newer vLLM:
  `reasoning`);
* `deepseek`: the thinking in `reasoning_content`, and a request whose input messages carry
  `reasoning_content` is refused; cache hits as `prompt_cache_hit_tokens`;
* `think-tags`: the content starts with `<think>THINKING</think>` (Qwen3, R1 distills on llama.cpp/Ollama);
* `azure`: only `POST /openai/deployments/DEPLOYMENT/chat/completions?api-version=VERSION` with the header
  `api-key: KEY` is served (401 for another key, 404 for another path or version).

Example (JSON): `["Hello", {"tool_calls": [{"name": "submit", "arguments": {"answer": "42"}}]}]`.

A malformed step is reported as a bad script: `load_script` names it, and at run time (a reply
function's step) the request gets HTTP 400 `fake server: bad script step ...`. A request past the end
of a list script gets HTTP 400 (`script exhausted`). Every request is appended to a JSONL log
(authorization removed).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from triforge.testing.strict_families import (
    DECOY_THINKING,
    FAMILIES,
    deliver_thinking,
    strict_refusal,
    usage_counts,
)

Script = list[Any] | Callable[[dict[str, Any]], Any]
class FakeOpenAIServer:
    def __init__(self, script: Script, *, host: str = "127.0.0.1", port: int = 0, delay_s: float = 0.0,
                 log_path: str | Path | None = None, reject_null_content: bool = False,
                 model: str = "fake-model", strict: str | None = None, reasoning_field: str = "reasoning_content",
                 azure_deployment: str = "my-deployment", azure_api_version: str = "2024-10-21",
                 azure_key: str = "azure-test-key") -> None:
        self.families = frozenset(f for f in re.split(r"[+,\s]+", strict or "") if f)
        unknown = sorted(self.families - set(FAMILIES))
        if unknown:
            raise ValueError(f"unknown strict famil{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)} "
                             f"(known: {', '.join(FAMILIES)})")
        if reasoning_field not in ("reasoning_content", "reasoning"):
            raise ValueError("reasoning_field is reasoning_content or reasoning")
        self.reasoning_field = reasoning_field
        self.azure = (azure_deployment, azure_api_version, azure_key)
        self.refused: list[dict[str, Any]] = []  # {"body": ..., "error": ...} of every refused request
        self.script = script
        self.delay_s = delay_s
        self.reject_null_content = reject_null_content
        self.model = model
        self.log_path = Path(log_path) if log_path else None
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._index = 0
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"fake": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def remaining(self) -> int:
        return len(self.script) - self._index if isinstance(self.script, list) else 0

    def next_step(self, body: dict[str, Any]) -> Any:
        with self._lock:
            self.requests.append(body)
            if self.log_path:
                with self.log_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"time": time.time(), "body": body}) + "\n")
            if callable(self.script):
                fn = self.script
            elif self._index >= len(self.script):
                self.errors.append("script exhausted")
                return {"fault": "exhausted"}
            else:
                step = self.script[self._index]
                self._index += 1
                return step
        return fn(body)  # outside the lock: a reply function may be slow, and requests run in parallel


STEP_KEYS = {"content", "tool_calls", "fault", "delay_s", "retry_after", "finish_reason", "usage", "role",
             "reasoning"}


class ScriptError(ValueError):
    """A script step that is not a reply the fake server can send."""


def _tool_call(tc: Any, where: str) -> dict[str, Any]:
    """One tool call in the flat shape `{"id"?, "name", "arguments"}`, from the flat or the OpenAI shape."""
    if not isinstance(tc, dict):
        raise ScriptError(f"{where} is {type(tc).__name__}, not an object with name and arguments")
    if "function" in tc:  # OpenAI shape
        fn = tc["function"]
        if not isinstance(fn, dict):
            raise ScriptError(f"{where}.function must be an object with name and arguments")
        flat = {"name": fn.get("name"), "arguments": fn.get("arguments", {}), **({"id": tc["id"]} if "id" in tc else {})}
    else:
        flat = {k: tc[k] for k in ("id", "name", "arguments") if k in tc}
        flat.setdefault("arguments", {})
    if not isinstance(flat.get("name"), str) or not flat["name"]:
        raise ScriptError(f"{where} has no name (use {{\"name\": ..., \"arguments\": {{...}}}} or the OpenAI shape)")
    if not isinstance(flat["arguments"], dict | str):
        raise ScriptError(f"{where}.arguments must be an object or a JSON string")
    return flat


def normalize_step(step: Any, where: str = "step") -> dict[str, Any]:
    """A script step as a dict with flat tool calls; raises `ScriptError` saying what is wrong."""
    if isinstance(step, str):
        return {"content": step}
    if not isinstance(step, dict):
        raise ScriptError(f"{where} is {type(step).__name__}; a step is a string or an object")
    unknown = sorted(set(step) - STEP_KEYS)
    if unknown:
        raise ScriptError(f"{where} has unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(STEP_KEYS))})")
    calls = step.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ScriptError(f"{where}.tool_calls must be a list")
    if step.get("content") is not None and not isinstance(step["content"], str):
        raise ScriptError(f"{where}.content must be a string")
    if step.get("reasoning") is not None and not isinstance(step["reasoning"], str):
        raise ScriptError(f"{where}.reasoning must be a string")
    return {**step, "tool_calls": [_tool_call(tc, f"{where}.tool_calls[{i}]") for i, tc in enumerate(calls)]}


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def completion_body(step: dict[str, Any], model: str, request: dict[str, Any],
                    families: frozenset[str] = frozenset(), reasoning_field: str = "reasoning_content"
                    ) -> dict[str, Any]:
    calls = [
        {"id": tc.get("id", f"call_{uuid.uuid4().hex[:8]}"), "type": "function",
         "function": {"name": tc["name"], "arguments": tc["arguments"] if isinstance(tc["arguments"], str)
                      else json.dumps(tc.get("arguments", {}))}}
        for tc in step.get("tool_calls", [])
    ]
    content = step.get("content")
    if step.get("fault") == "leak":
        content = json.dumps([{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                              for c in calls])
        calls = []
    thinking = step.get("reasoning", DECOY_THINKING) if families - {"azure"} else step.get("reasoning")
    content, fields = deliver_thinking(families, thinking, content, reasoning_field)
    msg: dict[str, Any] = {"role": "assistant", "content": content, **fields}
    if calls:
        msg["tool_calls"] = calls
    usage = step.get("usage") or {}
    prompt_tokens = int(usage.get("input_tokens", _tokens(json.dumps(request.get("messages", [])))))
    counts = usage_counts(families, usage, prompt_tokens, int(usage.get("output_tokens", _tokens(json.dumps(msg)))),
                          _tokens(thinking or ""))
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": step.get("finish_reason")
                     or ("tool_calls" if calls else "stop")}],
        "usage": counts,
    }


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle + delayed ACK add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _send(self, code: int, payload: bytes, ctype: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _error(self, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": {"message": message, "type": "fake_server_error", "code": code}})
        self._send(code, body.encode(), headers=headers)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            data = {"object": "list", "data": [{"id": self.fake.model, "object": "model", "owned_by": "triforge"}]}
            self._send(200, json.dumps(data).encode())
        elif self.path.rstrip("/") == "/health":
            self._send(200, b'{"status":"ok"}')
        else:
            self._error(404, f"no route {self.path}")

    def _azure_refusal(self) -> bool:
        """Answer a request Azure would not serve (wrong path, version or key); True when answered."""
        deployment, version, key = self.fake.azure
        parts = urlsplit(self.path)
        if parts.path.rstrip("/") != f"/openai/deployments/{deployment}/chat/completions" or \
                parse_qs(parts.query).get("api-version") != [version]:
            self._send(404, json.dumps({"error": {"code": "404", "message": "Resource not found"}}).encode())
            return True
        if self.headers.get("api-key") != key:
            self._send(401, json.dumps({"error": {"code": "401", "message": (
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
                "valid key for an active subscription and use a correct regional API endpoint for your "
                "resource.")}}).encode())
            return True
        return False

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if "azure" in self.fake.families:
            if self._azure_refusal():
                return
        elif self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}")
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._error(400, "request body is not JSON")
            return
        if (refused := strict_refusal(self.fake.families, body)) is not None:
            with self.fake._lock:
                self.fake.refused.append({"body": body, "error": refused["error"]})
            self._send(400, json.dumps(refused).encode())
            return
        if self.fake.reject_null_content:
            for m in body.get("messages", []):
                if m.get("role") == "assistant" and m.get("content") is None:
                    self._error(500, "Value is not a string: null (assistant content must be a string)")
                    return
        step = self.fake.next_step(body)
        if callable(step):
            step = step(body)
        if not (isinstance(step, dict) and step.get("fault") == "exhausted"):
            try:
                step = normalize_step(step, f"script step {len(self.fake.requests)}")
            except ScriptError as e:
                self.fake.errors.append(f"bad {e}")
                self._error(400, f"fake server: bad {e}")
                return
        delay = float(step.get("delay_s", self.fake.delay_s))
        fault = str(step.get("fault", ""))
        if fault == "exhausted":
            self._error(400, "fake server: script exhausted")
            return
        if fault == "slow":
            time.sleep(float(step.get("delay_s", 30.0)))
        elif delay:
            time.sleep(delay)
        if fault == "429":
            self._error(429, "rate limited", {"Retry-After": str(step.get("retry_after", 1))})
        elif fault.isdigit():
            self._error(int(fault), f"injected HTTP {fault}")
        elif fault == "truncated":
            full = json.dumps(self._reply(step, body)).encode()
            self._send(200, full[: len(full) // 2])
        elif fault == "empty_choices":
            data = self._reply(step, body)
            data["choices"] = []
            self._send(200, json.dumps(data).encode())
        elif body.get("stream"):
            self._stream(self._reply(step, body))
        else:
            self._send(200, json.dumps(self._reply(step, body)).encode())

    def _reply(self, step: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        return completion_body(step, self.fake.model, body, self.fake.families, self.fake.reasoning_field)

    def _stream(self, data: dict[str, Any]) -> None:
        msg = data["choices"][0]["message"]
        base = {"id": data["id"], "object": "chat.completion.chunk", "created": data["created"],
                "model": data["model"]}
        chunks = [{"role": "assistant", "content": ""}]
        text = msg.get("content") or ""
        chunks += [{"content": text[i:i + 16]} for i in range(0, len(text), 16)]
        for i, tc in enumerate(msg.get("tool_calls", [])):
            chunks.append({"tool_calls": [{"index": i, **tc}]})
        events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in chunks]
        events.append({**base, "choices": [{"index": 0, "delta": {},
                                            "finish_reason": data["choices"][0]["finish_reason"]}],
                       "usage": data["usage"]})
        payload = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self._send(200, payload.encode(), ctype="text/event-stream")


def load_script(path: str | Path) -> Script:
    """A script file: JSON (a list of steps) or Python (defines `script` list or `reply(request)`)."""
    from triforge.core.errors import UserError
    from triforge.core.textfile import read_user_text

    p = Path(path)
    text = read_user_text(p, "script file")
    if p.suffix == ".py":
        ns: dict[str, Any] = {}
        try:
            exec(compile(text, str(p), "exec"), ns)  # the user's own script file
        except SyntaxError as e:
            raise UserError(f"{p}: syntax error at line {e.lineno}: {e.msg}") from None
        except Exception as e:  # noqa: BLE001 - whatever the user's script raises, said in one line
            raise UserError(f"{p} failed while loading: {type(e).__name__}: {e}") from None
        if callable(ns.get("reply")):
            return ns["reply"]
        if isinstance(ns.get("script"), list):
            return _checked(ns["script"], p)
        raise UserError(f"{p} defines neither `script` (a list) nor `reply(request)`")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{p} is not valid JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(data, list):
        raise UserError(f"{p} must hold a JSON list of reply steps")
    return _checked(data, p)


def _checked(steps: list[Any], path: Path) -> list[Any]:
    from triforge.core.errors import UserError

    for i, step in enumerate(steps, 1):
        try:
            normalize_step(step, f"step {i}")
        except ScriptError as e:
            raise UserError(f"bad script {path}: {e}") from None
    return steps
