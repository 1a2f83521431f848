"""What a model's endpoint takes, and the request body shaped to it.

Three sources, strongest first: what the alias declares in triforge.toml (`reasoning`,
`token_limit_param`, `supports_temperature`, `supports_stop`, `reasoning_effort`, `send_reasoning_back`),
the defaults of a documented family (OpenAI's GPT-5 and o-series on an OpenAI or Azure endpoint refuse
`max_tokens`, a temperature other than 1 and `stop`), and what the server refused at run time: a 400 that
names one parameter (OpenAI's `param` with code `unsupported_parameter`/`unsupported_value`, or another
provider's message naming it) teaches the client to drop or rename that parameter for the rest of the
process (`Learned`), once, with no loop.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from triforge.core.config import ModelConfig

# Parameters a refusal may name and the client may adapt; `reasoning_content` stands for the thinking of
# earlier turns inside assistant messages (DeepSeek's API refuses it there).
ADAPTABLE = ("max_tokens", "max_completion_tokens", "temperature", "stop", "reasoning_effort", "response_format",
             "top_p", "seed", "tool_choice", "parallel_tool_calls", "reasoning_content")
REASONING_KEYS = ("reasoning_content", "reasoning")
_REASONING_FAMILY = re.compile(r"^(?:openai/)?(?:gpt-5(?!.*chat)|o[134](?:-|$))", re.I)
_OPENAI_HOSTS = ("api.openai.com",)
_AZURE_HOST_ENDS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")
_REFUSAL_WORDS = re.compile(r"unsupported|not supported|does not support|unknown|unrecognized|not allowed|"
                            r"not permitted|cannot find field|extra (?:inputs|fields)|not (?:a )?valid|invalid", re.I)


@dataclass(frozen=True)
class Capabilities:
    reasoning: bool = False
    token_limit_param: str = "max_tokens"
    supports_temperature: bool = True
    supports_stop: bool = True
    reasoning_effort: str | None = None
    send_reasoning_back: bool = False
    family: str | None = None  # the documented family whose defaults apply, if any


def reasoning_family(cfg: ModelConfig) -> str | None:
    """"openai-reasoning" for a GPT-5/o-series model on an OpenAI or Azure endpoint, else None."""
    host = (urlsplit(cfg.base_url or "").hostname or "").lower()
    on_openai = cfg.api_type == "azure" or host in _OPENAI_HOSTS or host.endswith(_AZURE_HOST_ENDS)
    return "openai-reasoning" if on_openai and _REASONING_FAMILY.match(cfg.model) else None


def capabilities(cfg: ModelConfig) -> Capabilities:
    """The alias's declared capabilities over its family's defaults."""
    family = reasoning_family(cfg)
    base = (Capabilities(reasoning=True, token_limit_param="max_completion_tokens", supports_temperature=False,
                         supports_stop=False, family=family) if family else Capabilities())

    def pick(name: str) -> Any:
        declared = getattr(cfg, name)
        return getattr(base, name) if declared is None else declared

    return Capabilities(reasoning=pick("reasoning"), token_limit_param=pick("token_limit_param"),
                        supports_temperature=pick("supports_temperature"), supports_stop=pick("supports_stop"),
                        reasoning_effort=cfg.reasoning_effort, send_reasoning_back=cfg.send_reasoning_back,
                        family=family)


def strip_reasoning(messages: list[dict[str, Any]], *, keep: bool) -> list[dict[str, Any]]:
    """Messages without earlier turns' thinking; with `keep`, assistant thinking goes as `reasoning_content`."""
    out = []
    for m in messages:
        if not any(k in m for k in REASONING_KEYS):
            out.append(m)
            continue
        thought = next((m[k] for k in REASONING_KEYS if m.get(k)), None)
        m = {k: v for k, v in m.items() if k not in REASONING_KEYS}
        if keep and thought and m.get("role") == "assistant":
            m["reasoning_content"] = thought
        out.append(m)
    return out


def shape_body(body: dict[str, Any], caps: Capabilities) -> dict[str, Any]:
    """The generic request body as this model takes it, by its declared and family capabilities."""
    out = dict(body)
    if "messages" in out:
        out["messages"] = strip_reasoning(out["messages"], keep=caps.send_reasoning_back)
    if "max_tokens" in out and caps.token_limit_param != "max_tokens":
        out[caps.token_limit_param] = out.pop("max_tokens")
    if not caps.supports_temperature:
        out.pop("temperature", None)
    if not caps.supports_stop:
        out.pop("stop", None)
    if caps.reasoning_effort and "reasoning_effort" not in out:
        out["reasoning_effort"] = caps.reasoning_effort
    return out


def apply_learned(body: dict[str, Any], learned: dict[str, str]) -> dict[str, Any]:
    """The body with the adaptations learned from refusals (`param -> "drop" | "rename:NEW"`), in order."""
    out = dict(body)
    for param, action in learned.items():
        if param == "reasoning_content":
            if "messages" in out:
                out["messages"] = strip_reasoning(out["messages"], keep=False)
            continue
        if param not in out:
            continue
        value = out.pop(param)
        if action.startswith("rename:"):
            out[action.split(":", 1)[1]] = value
    return out


def sends_reasoning(body: dict[str, Any]) -> bool:
    return any("reasoning_content" in m for m in body.get("messages") or [] if isinstance(m, dict))


def error_text(error: Any) -> str:
    """What an HTTP error says: its message, and its body where the message does not carry it (the SDK puts
    only a `message` field into the text; FastAPI's `detail` list, Google's list of errors and TGI's `error`
    string are left in the body)."""
    body = getattr(error, "body", None)
    message = str(body.get("message") or "") if isinstance(body, dict) else ""
    if message:
        return message
    head = str(getattr(error, "message", "") or "")
    if body is None or body == "":
        return head
    rest = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
    return f"{head} - {rest}" if head else rest


def read_refusal(error: Any, sent: dict[str, Any], learned: dict[str, str]) -> tuple[str, str] | None:
    """The one parameter a 400 (or 422) refuses, and what to do about it (`"drop"` or `"rename:NEW"`), or None
    when it is not about a parameter the client can adapt (or it was already adapted: never loop)."""
    err = error.body if isinstance(getattr(error, "body", None), dict) else {}
    message = error_text(error)
    param, code = err.get("param"), str(err.get("code") or "")
    present = [p for p in ADAPTABLE if p in sent or (p == "reasoning_content" and sends_reasoning(sent))]
    if param not in present or not (code.startswith("unsupported") or _REFUSAL_WORDS.search(message)):
        param = None
        if _REFUSAL_WORDS.search(message):  # another provider's 400: the first adaptable parameter it names
            named = [(m.start(), p) for p in present
                     if (m := re.search(rf"(?<![\w.]){re.escape(p)}(?!\w)", message))]
            param = min(named)[1] if named else None
    if param is None or param in learned:
        return None
    renames = {"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}
    target = renames.get(param)
    if target and target not in learned and target not in sent and (
            target in message or param == "max_completion_tokens"):
        return param, f"rename:{target}"
    return param, "drop"


class Learned:
    """Adaptations learned from refusals, per endpoint and model, for the life of the process; thread-safe."""

    def __init__(self) -> None:
        self._rules: dict[tuple[str, str], dict[str, str]] = {}
        self._lock = threading.Lock()

    def rules(self, endpoint: str, model: str) -> dict[str, str]:
        with self._lock:
            return dict(self._rules.get((endpoint, model), {}))

    def learn(self, endpoint: str, model: str, param: str, action: str) -> bool:
        """Record a rule; False when it was known already (another thread learned it first)."""
        with self._lock:
            rules = self._rules.setdefault((endpoint, model), {})
            if param in rules:
                return False
            rules[param] = action
            return True


def describe(param: str, action: str) -> str:
    if action.startswith("rename:"):
        return f"sending {param!r} as {action.split(':', 1)[1]!r}"
    if param == "reasoning_content":
        return "no longer sending earlier turns' thinking (reasoning_content)"
    return f"no longer sending {param!r}"


def toml_hint(param: str, action: str) -> str | None:
    """The alias line that declares what was learned, or None when there is none."""
    if param in ("max_tokens", "max_completion_tokens") and action.startswith("rename:"):
        return f'token_limit_param = "{action.split(":", 1)[1]}"'
    return {"temperature": "supports_temperature = false", "stop": "supports_stop = false",
            "reasoning_content": "send_reasoning_back = false", "response_format": "json_mode = false"}.get(param)


# What this process learned (a CLI command is one run); a client may be given its own store instead.
PROCESS_LEARNED = Learned()
