"""The provider seam: model aliases that core does not serve itself plug in here from above.

A provider serves one built-in alias (used when triforge.toml does not define it) and owns the model
configs whose `base_url` starts with its scheme (`local://...` for the embedded model). Core names no
provider: a package above registers one, by object or by the module that holds it (loaded on first use,
so that importing core loads no provider):

    register("local", "triforge.local.llm")      # the module's PROVIDER attribute

`triforge/__init__.py` registers the embedded local model this way.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from triforge.core.config import ModelConfig
    from triforge.core.llm import LLM


class Provider(Protocol):
    alias: str  # the model alias it serves when triforge.toml does not define it
    scheme: str  # the base_url prefix of the configs it serves, e.g. "local://"

    def builtin_config(self) -> ModelConfig:
        """The alias's config; raises a UserError saying how to set it up when it cannot be used."""
        ...

    def is_default(self) -> bool:
        """Whether it is the model to use when none is configured anywhere."""
        ...

    def make_llm(self, alias: str, config: ModelConfig) -> LLM:
        """The client for a config with this provider's scheme (the caller closes it)."""
        ...


_registry: dict[str, Provider | str] = {}


def register(name: str, provider: Provider | str) -> None:
    """Register a provider, or the dotted path of a module whose `PROVIDER` is one (loaded on first use)."""
    _registry[name] = provider


def _load(name: str) -> Provider:
    entry = _registry[name]
    if isinstance(entry, str):
        entry = _registry[name] = importlib.import_module(entry).PROVIDER  # type: ignore[attr-defined]
    return entry


def providers() -> list[Provider]:
    return [_load(name) for name in list(_registry)]


def for_alias(alias: str) -> Provider | None:
    return next((p for p in providers() if p.alias == alias), None)


def for_base_url(base_url: str | None) -> Provider | None:
    if not base_url:
        return None
    return next((p for p in providers() if base_url.startswith(p.scheme)), None)


def default_alias() -> str | None:
    """The alias of the first registered provider that is the default (when nothing is configured)."""
    return next((p.alias for p in providers() if p.is_default()), None)
