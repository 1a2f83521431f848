"""The `local` model alias: an OpenAI-compatible client that owns a llama.cpp server.

    with get_llm("local") as llm:          # or: llm = get_llm("local"); try: ... finally: llm.close()
        llm.complete(messages, tools=...)

The server starts on the first request (a fully cached run never starts one), on a free loopback port.
If `triforge local serve` is running the same model, the client uses that server and starts none.
`close()` (or leaving the `with` block) stops a server the client started; so do interpreter exit and,
through the watchdog, the death of this process. A server that dies mid-run is restarted (twice at most)
and the request retried, so a run keeps going; past that the run stops with an `EndpointError` that
says why, and re-running the same command resumes from its run directory.

The config's `base_url` is `local://<model file>`: stable across runs, so the response cache and the
per-endpoint concurrency limits key on the model, not on the port of the day.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai

from triforge.core.config import ModelConfig
from triforge.core.errors import EndpointError
from triforge.core.llm import Completion, OpenAICompatLLM
from triforge.local import state
from triforge.local.install import LocalModelError, installed_model
from triforge.local.quirks import adapt_chatml_function_calling
from triforge.local.server import (
    NATIVE_CHAT_FORMAT,
    LocalServer,
    ServerOptions,
    explain_exit,
    healthy,
    tool_mode,
)

LOCAL_ALIAS = "local"
LOCAL_SCHEME = "local://"
MAX_RESTARTS = 2


def local_model_config(model_path: Path | None = None) -> ModelConfig:
    """The built-in config of the `local` alias (used when triforge.toml does not define `local`)."""
    path = model_path or installed_model()
    if path is None:
        raise LocalModelError("the local model is not installed; run `triforge local install` "
                              "(about 1.1 GB download), or configure another model with --model")
    return ModelConfig(
        model=LOCAL_ALIAS, base_url=f"{LOCAL_SCHEME}{path}",
        timeout_s=float(os.environ.get("TRIFORGE_LOCAL_TIMEOUT", "300")), max_retries=3,
        max_concurrency=1,  # llama-cpp-python's server runs one request at a time
        # Text mode (the default, `tool_mode()`): triforge's text tool protocol, the GGUF's own chat template
        # and a cap on every reply. Native mode's server format HTML-escapes prompts and ignores max_tokens.
        native_tools=tool_mode() == "native",
        max_tokens=None if tool_mode() == "native" else int(os.environ.get("TRIFORGE_LOCAL_MAX_TOKENS", "768")),
    )


def is_local(cfg: ModelConfig) -> bool:
    return bool(cfg.base_url and cfg.base_url.startswith(LOCAL_SCHEME))


class LocalLLM(OpenAICompatLLM):
    """`OpenAICompatLLM` whose endpoint is a llama.cpp server it starts (or a shared `local serve`)."""

    def __init__(self, alias: str, config: ModelConfig, *, options: ServerOptions | None = None,
                 server_factory: Callable[[], LocalServer] | None = None, share: bool = True, **kw: Any) -> None:
        if not is_local(config):
            raise ValueError(f"LocalLLM needs a {LOCAL_SCHEME} base_url, got {config.base_url!r}")
        super().__init__(alias, config, **kw)
        self.model_path = Path(config.base_url[len(LOCAL_SCHEME):])  # type: ignore[index]
        self.options = options or ServerOptions.from_env(self.model_path)
        self._factory = server_factory or (lambda: LocalServer(self.options))
        self._share = share
        self._server: LocalServer | None = None
        self._url: str | None = None
        self._lock = threading.Lock()
        self.restarts = 0
        self._lost_cause = ""

    @property
    def server(self) -> LocalServer | None:
        """The server this client started, if any (None while using a shared `local serve`)."""
        return self._server

    def endpoint_url(self) -> str:
        """Start (or find) the server now and return its base URL."""
        with self._lock:
            if self._url is None:
                self._url = self._connect()
            return self._url

    def _connect(self) -> str:
        if self._share and self._server is None:
            shared = state.running()
            if (shared and shared.get("healthy") and shared.get("model_path") == str(self.model_path)
                    and shared.get("chat_format", NATIVE_CHAT_FORMAT) == self.options.chat_format):
                # (a server recorded before chat formats were recorded ran the native format)
                return self._use(str(shared["base_url"]))
        if self._server is not None and self._server.alive():
            return self._use(self._server.base_url)
        if self._server is not None:  # it died (or stopped answering): restart it, a bounded number of times
            self.restarts += 1
            cause = self._lost_cause or "it stopped answering"
            self._server.stop()
            self._server = None
            if self.restarts > MAX_RESTARTS:
                raise EndpointError(
                    f"the local model server died {self.restarts} times ({cause}); the run stopped and its "
                    f"run directory is kept: fix the cause and run the same command again to resume"
                )
        self._server = self._factory()
        self._server.start()
        return self._use(self._server.base_url)

    def _check_lost(self, url: str) -> bool:
        """After a connection error: is the server gone? (Gives a dying process a moment to be seen dead.)"""
        srv = self._server
        if srv is None:
            return not healthy(url)
        deadline = time.monotonic() + 2.0
        while srv.alive() and time.monotonic() < deadline:
            if healthy(url, timeout=0.5):
                return False  # a transient error: the retry loop retries against the same server
            time.sleep(0.1)
        proc = srv.proc
        rc = proc.poll() if proc is not None else None
        self._lost_cause = explain_exit(srv.log_path, rc) if srv.log_path else "it stopped answering"
        srv.stop()  # dead, or alive but not answering: either way it is replaced
        return True

    def _use(self, url: str) -> str:
        self._client = openai.OpenAI(base_url=url, api_key="sk-no-key-needed", timeout=self.config.timeout_s,
                                     max_retries=0)
        return url

    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                     temperature: float | None, max_tokens: int | None, json_mode: bool,
                     stop: list[str] | None = None) -> dict[str, Any]:
        """The OpenAI body; in native mode reshaped for chatml-function-calling (`triforge.local.quirks`)."""
        body = super().request_body(messages, tools, temperature, max_tokens, json_mode, stop)
        return adapt_chatml_function_calling(body) if self.options.chat_format == NATIVE_CHAT_FORMAT else body

    def _call_once(self, body: dict[str, Any]) -> Completion:
        url = self.endpoint_url()
        try:
            return super()._call_once(body)
        except openai.APITimeoutError:
            # llama-cpp-python goes on generating after the client gives up (and ignores max_tokens in tool
            # mode), so a retry would queue behind the runaway generation: replace our own server first.
            with self._lock:
                if self._server is not None:
                    self._lost_cause = f"a reply took longer than {self.config.timeout_s:g} s"
                    self._server.stop()
                    if self._url == url:
                        self._url = None
            raise
        except openai.APIConnectionError:
            if self._check_lost(url):
                with self._lock:
                    if self._url == url:
                        self._url = None  # the next attempt (the retry loop's) reconnects or restarts
            raise

    def close(self) -> None:
        """Stop the server this client started (a shared `local serve` keeps running)."""
        with self._lock:
            if self._server is not None:
                self._server.stop()
            self._server = None
            self._url = None
        super().close()

    def __enter__(self) -> LocalLLM:
        return self


class LocalProvider:
    """The embedded model as a core provider (`triforge.core.providers`): the `local` alias."""

    alias = LOCAL_ALIAS
    scheme = LOCAL_SCHEME

    def builtin_config(self) -> ModelConfig:
        return local_model_config()

    def is_default(self) -> bool:
        return installed_model() is not None

    def make_llm(self, alias: str, config: ModelConfig) -> LocalLLM:
        return LocalLLM(alias, config)


PROVIDER = LocalProvider()
