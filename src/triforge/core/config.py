"""Model aliases and settings from `triforge.toml`, environment variables and CLI options.

Precedence, lowest first: built-in defaults, the user config file
(`$XDG_CONFIG_HOME/triforge/triforge.toml`, else `~/.config/triforge/triforge.toml`),
`./triforge.toml`, the file named by `TRIFORGE_CONFIG`, environment variables
(`TRIFORGE_MODEL`, `TRIFORGE_BASE_URL`, `TRIFORGE_API_KEY_ENV`), then CLI options.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from triforge.core import providers
from triforge.core.errors import ConfigError


class ModelConfig(BaseModel):
    """One model alias: where it is served and how it behaves."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="model name sent to the endpoint")
    base_url: str | None = Field(default=None, description="OpenAI-compatible base URL, e.g. http://localhost:8000/v1")
    api_key_env: str | None = Field(default=None, description="name of the environment variable holding the key")
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    native_tools: bool = True
    json_mode: bool = False
    price_in_per_mtok: float = Field(default=0.0, ge=0)
    price_out_per_mtok: float = Field(default=0.0, ge=0)
    max_concurrency: int = Field(default=8, ge=1, description="calls in flight to this endpoint")
    price_cached_in_per_mtok: float | None = Field(default=None, ge=0, description="cached input; unset: price_in")
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    # Azure OpenAI: base_url is the resource endpoint (https://NAME.openai.azure.com), `deployment` the
    # deployment name (default: model); the SDK's Azure client sends the api-key header and api-version.
    api_type: Literal["openai", "azure"] = "openai"
    api_version: str | None = None
    deployment: str | None = None
    # What the model takes (unset: the family default, see triforge.core.capabilities, else what the
    # server refuses at run time is learned and adapted).
    reasoning: bool | None = Field(default=None, description="the model thinks before it answers (ping gives it room)")
    token_limit_param: Literal["max_tokens", "max_completion_tokens"] | None = None
    supports_temperature: bool | None = None
    supports_stop: bool | None = None
    reasoning_effort: str | None = Field(default=None, pattern=r"^[a-z]+$", description="e.g. low, medium, high")
    send_reasoning_back: bool = Field(default=False, description="send earlier turns' thinking back")

    @model_validator(mode="after")
    def _azure_needs_a_version(self) -> ModelConfig:
        if self.api_type == "azure" and not self.api_version:
            raise ValueError('api_type "azure" needs api_version, e.g. api_version = "2024-10-21"')
        return self

    def cost_usd(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """Cached input tokens are part of `input_tokens`, priced at `price_cached_in_per_mtok`; reasoning
        tokens are part of `output_tokens` (as OpenAI counts them)."""
        cached = min(max(0, cached_input_tokens), input_tokens)
        cached_price = self.price_in_per_mtok if self.price_cached_in_per_mtok is None else self.price_cached_in_per_mtok
        return ((input_tokens - cached) * self.price_in_per_mtok + cached * cached_price
                + output_tokens * self.price_out_per_mtok) / 1e6


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default_model: str | None = None
    runs_dir: str = "runs"
    cache: Literal["off", "rw", "replay"] = "off"
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    sources: list[str] = Field(default_factory=list, exclude=True)


def user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "triforge"


def config_files(cwd: Path | None = None) -> list[Path]:
    files = [user_config_dir() / "triforge.toml", (cwd or Path.cwd()) / "triforge.toml"]
    explicit = os.environ.get("TRIFORGE_CONFIG")
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise ConfigError(f"TRIFORGE_CONFIG points to {p}, which is not a file; fix the path or unset it")
        files.append(p)
    return [f for f in files if f.is_file()]


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _first_error(e: ValidationError) -> str:
    """The error to show: a misspelt key before what its misspelling left missing (`modell` before `model`)."""
    errors = sorted(e.errors(), key=lambda err: err["type"] != "extra_forbidden")
    err = errors[0]
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        loc = err["loc"]
        known = ModelConfig.model_fields if len(loc) == 3 and loc[0] == "models" else Settings.model_fields
        close = difflib.get_close_matches(str(loc[-1]), list(known), n=1)
        return f"{where}: unknown key" + (f" (did you mean {close[0]!r}?)" if close else
                                          f"; known keys: {', '.join(known)}")
    return f"{where}: {err['msg']}"


def load_settings(cwd: Path | None = None, files: list[Path] | None = None) -> Settings:
    data: dict[str, Any] = {}
    used = files if files is not None else config_files(cwd)
    for f in used:
        try:
            data = _merge(data, tomllib.loads(f.read_text()))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{f} is not valid TOML ({e}); fix the file or move it away") from None
    try:
        settings = Settings.model_validate(data)
    except ValidationError as e:
        src = ", ".join(str(f) for f in used) or "defaults"
        raise ConfigError(f"invalid config in {src}: {_first_error(e)}") from None
    settings.sources = [str(f) for f in used]
    if os.environ.get("TRIFORGE_MODEL"):
        settings.default_model = os.environ["TRIFORGE_MODEL"]
    return settings


def resolve_model(
    alias: str | None,
    settings: Settings | None = None,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
) -> tuple[str, ModelConfig]:
    """Turn an alias (or the default) into its config, applying environment and CLI overrides.

    An alias that is not configured is accepted as a raw model name when a base URL is given.
    A registered provider's alias (`triforge.core.providers`; `local`, the embedded llama.cpp model) is used
    unless triforge.toml defines it, and the provider that says so is the default when nothing else is
    configured (`local`, once `triforge local install` has been run).
    """
    settings = settings or load_settings()
    name = alias or settings.default_model
    if not name and not base_url and not os.environ.get("TRIFORGE_BASE_URL"):
        name = providers.default_alias()
    if not name:
        raise ConfigError(
            "no model given: pass --model ALIAS, set TRIFORGE_MODEL, or set default_model in triforge.toml"
        )
    url_source = "--base-url" if base_url else "TRIFORGE_BASE_URL"
    base_url = base_url or os.environ.get("TRIFORGE_BASE_URL") or None
    if base_url:
        check_base_url(base_url, url_source)
    api_key_env = api_key_env or os.environ.get("TRIFORGE_API_KEY_ENV") or None
    if name not in settings.models and not base_url and (provider := providers.for_alias(name)) is not None:
        return name, provider.builtin_config()
    if name in settings.models:
        cfg = settings.models[name]
    elif base_url:
        cfg = ModelConfig(model=name)
    else:
        raise ConfigError(
            f"unknown model alias {name!r} ({_known_aliases(settings)}); add [models.{name}] to triforge.toml "
            f"or pass --base-url to use {name!r} as a raw model name"
        )
    updates: dict[str, Any] = {}
    if base_url:
        updates["base_url"] = base_url
    if api_key_env:
        updates["api_key_env"] = api_key_env
    cfg = cfg.model_copy(update=updates)
    if not cfg.base_url:
        raise ConfigError(f"model alias {name!r} has no base_url; set it in triforge.toml or pass --base-url")
    if not base_url:
        check_base_url(cfg.base_url, f"base_url of [models.{name}]")
    return name, cfg


def _known_aliases(settings: Settings) -> str:
    """The configured aliases and the built-in ones (`local`: available once installed), for an unknown-alias
    error."""
    configured = ", ".join(sorted(settings.models)) or "none configured"
    builtin = []
    for p in providers.providers():
        if p.alias not in settings.models:
            builtin.append(f"{p.alias} (available: --model {p.alias})" if p.is_default() else
                           f"{p.alias} (not set up here)")
    return f"known: {configured}" + (f"; built in: {', '.join(builtin)}" if builtin else "")


def check_base_url(url: str, source: str) -> str:
    """An endpoint URL must be http(s)://HOST[:PORT][/path] (or a registered provider's scheme); a malformed
    one is a configuration error at once, not an endpoint to retry."""
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:
        ok = False
    if ok and not any(c.isspace() for c in url) or providers.for_base_url(url) is not None:
        return url
    raise ConfigError(f"{source} {url!r} is not a valid URL: give http(s)://HOST[:PORT]/v1, "
                      f"e.g. http://localhost:8000/v1")
