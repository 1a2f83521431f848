"""The models of a run: its default model, plus any other alias a part of the run names, each opened once."""

from __future__ import annotations

import threading
from typing import Any

from triforge.core.llm import LLM, get_llm


class ModelPool:
    """`pool(alias)` is the client for `alias` (None: the default), opened on first use and closed by `close`.
    The CLI options `--base-url` and `--api-key-env` apply to every alias. `default`: a client the caller
    made (a scripted or in-process model) in place of the one `model` names."""

    def __init__(self, model: str | None, base_url: str | None = None, api_key_env: str | None = None,
                 default: LLM | None = None) -> None:
        self._base_url, self._key_env, self._model, self._given = base_url, api_key_env, model, default
        self._lock = threading.Lock()
        self.default: LLM = default if default is not None else get_llm(model, base_url=base_url,
                                                                        api_key_env=api_key_env)
        self._opened: dict[str, LLM] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its options: a task on another process opens its own models."""
        return (type(self), (self._model, self._base_url, self._key_env, self._given))

    def __call__(self, alias: str | None) -> LLM:
        if alias is None or alias == self.default.alias:
            return self.default
        with self._lock:
            if alias not in self._opened:
                self._opened[alias] = get_llm(alias, base_url=self._base_url, api_key_env=self._key_env)
            return self._opened[alias]

    def close(self) -> None:
        mine = [self.default] if self._given is None else []  # a client the caller gave stays the caller's
        for llm in [*mine, *self._opened.values()]:
            close = getattr(llm, "close", None)
            if callable(close):
                close()
