"""The `local` alias: resolution, a client that owns its server, restarts, and sharing `local serve`."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from local_helpers import fake_server_command

from triforge.core.config import ModelConfig, Settings, resolve_model
from triforge.core.errors import ConfigError, EndpointError
from triforge.core.llm import get_llm
from triforge.local import state
from triforge.local.install import LocalModelError, choose_model
from triforge.local.llm import MAX_RESTARTS, LocalLLM, local_model_config
from triforge.local.server import LocalServer, healthy

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIFORGE_HOME", str(tmp_path / "home"))
    p = tmp_path / "tiny.gguf"
    p.write_bytes(b"GGUF\x03\x00\x00\x00")
    return choose_model(p)


def make_llm(path, script, **kw) -> tuple[LocalLLM, list[LocalServer]]:
    started: list[LocalServer] = []

    def factory() -> LocalServer:
        srv = LocalServer(command=fake_server_command(script))
        started.append(srv)
        return srv

    llm = LocalLLM("local", local_model_config(path), server_factory=factory, sleep=lambda s: None, **kw)
    return llm, started


def test_local_not_installed_says_how_to_install():
    with pytest.raises(LocalModelError, match="not installed; run `triforge local install`"):
        resolve_model("local", Settings())
    with pytest.raises(ConfigError, match="no model given"):  # no default either
        resolve_model(None, Settings())


def test_local_resolves_to_the_installed_model_and_is_the_default(fake_gguf):
    for alias in ("local", None):
        name, cfg = resolve_model(alias, Settings())
        assert name == "local" and cfg.base_url == f"local://{fake_gguf}"
        assert cfg.max_concurrency == 1 and not cfg.native_tools  # text mode by default
    assert resolve_model(None, Settings(default_model="x", models={"x": ModelConfig(
        model="m", base_url="http://127.0.0.1:1/v1")}))[0] == "x"  # a configured default wins


def test_configured_local_alias_and_base_url_override_win(fake_gguf):
    mine = ModelConfig(model="qwen", base_url="http://127.0.0.1:9999/v1")
    assert resolve_model("local", Settings(models={"local": mine}))[1].base_url == mine.base_url
    _, cfg = resolve_model("local", Settings(), base_url="http://127.0.0.1:8080/v1")
    assert cfg.base_url == "http://127.0.0.1:8080/v1"


def test_get_llm_local_starts_nothing_until_used(fake_gguf):
    with get_llm("local", settings=Settings()) as llm:
        assert isinstance(llm, LocalLLM) and llm.server is None


def test_requests_go_through_one_owned_server_which_close_stops(fake_gguf, echo_script):
    llm, started = make_llm(fake_gguf, echo_script)
    with llm:
        assert llm.complete(HELLO).content == "reply 1: hello"
        assert llm.complete(HELLO).content == "reply 2: hello"
        url = llm.endpoint_url()
        assert len(started) == 1 and healthy(url)
        assert llm.config.base_url == f"local://{fake_gguf}"  # the cache key does not depend on the port
    assert not healthy(url) and llm.server is None


def test_a_server_that_dies_mid_run_is_restarted(fake_gguf, echo_script):
    llm, started = make_llm(fake_gguf, echo_script)
    with llm:
        assert llm.complete(HELLO).content == "reply 1: hello"
        os.killpg(started[0].pid, signal.SIGKILL)
        started[0].proc.wait()
        assert llm.complete(HELLO).content == "reply 1: hello"  # a fresh server answered
        assert llm.restarts == 1 and len(started) == 2


def test_a_server_that_keeps_dying_stops_the_run_with_the_cause(fake_gguf, tmp_path):
    script = tmp_path / "crash.py"
    script.write_text("import os, signal\ndef reply(request):\n    os.killpg(os.getpgrp(), signal.SIGKILL)\n")
    llm, started = make_llm(fake_gguf, script)
    with llm, pytest.raises(EndpointError) as e:
        llm.complete(HELLO)
    msg = str(e.value)
    assert f"died {MAX_RESTARTS + 1} times" in msg and "run the same command again to resume" in msg
    assert len(started) == MAX_RESTARTS + 1


def test_a_running_local_serve_is_shared(fake_gguf, echo_script):
    shared = LocalServer(command=fake_server_command(echo_script)).start()
    try:
        state.record(shared, fake_gguf, detached=False)
        llm, started = make_llm(fake_gguf, echo_script)
        with llm:
            assert llm.complete(HELLO).content == "reply 1: hello"
        assert started == [] and healthy(shared.base_url)  # closing the client left the shared server up
        other, started = make_llm(fake_gguf.with_name("other.gguf"), echo_script)
        with other:
            other.endpoint_url()
        assert len(started) == 1  # a different model file: not shared
        data = json.loads(state.state_file().read_text())
        state.state_file().write_text(json.dumps({**data, "chat_format": "chatml-function-calling"}))
        native_served, started = make_llm(fake_gguf, echo_script)
        with native_served:
            native_served.endpoint_url()
        assert len(started) == 1  # served in the native (escaping) format: a text-mode client starts its own
    finally:
        shared.stop()
        state.clear()


def test_state_status_and_stop_of_a_detached_server(fake_gguf, echo_script):
    srv = LocalServer(command=fake_server_command(echo_script), watch_parent=False).start()
    state.record(srv, fake_gguf, detached=True)
    pid = srv.release()
    running = state.running()
    assert running is not None and running["pid"] == pid and running["healthy"]
    stopped = state.stop_recorded()
    assert stopped is not None and stopped["pid"] == pid
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and healthy(running["base_url"]):
        time.sleep(0.1)
    assert state.running() is None and not state.state_file().exists()


def test_stale_state_file_is_removed(fake_gguf):
    from triforge.local.paths import write_json

    write_json(state.state_file(), {"pid": 2**22 + 12345, "base_url": "http://127.0.0.1:1/v1"})
    assert state.running() is None and not state.state_file().exists()


def test_a_runaway_generation_past_the_timeout_replaces_the_server(fake_gguf, tmp_path, monkeypatch):
    """llama-cpp-python keeps generating after the client gives up; retrying on the same server would queue."""
    monkeypatch.setenv("TRIFORGE_LOCAL_TIMEOUT", "1")
    script = tmp_path / "slow_once.py"
    marker = tmp_path / "slow.done"
    script.write_text(
        "import pathlib, time\n"
        f"M = pathlib.Path({str(marker)!r})\n"
        "def reply(request):\n"
        "    if not M.exists():\n"
        "        M.write_text('x')\n"
        "        time.sleep(30)\n"
        "    return 'fast reply'\n"
    )
    llm, started = make_llm(fake_gguf, script)
    with llm:
        t0 = time.monotonic()
        assert llm.complete(HELLO).content == "fast reply"
        assert time.monotonic() - t0 < 20
        assert len(started) == 2 and not started[0].alive() and llm.restarts == 1


def test_text_tool_protocol_with_a_reply_cap_is_the_default(fake_gguf, monkeypatch):
    monkeypatch.delenv("TRIFORGE_LOCAL_TOOLS", raising=False)
    cfg = local_model_config(fake_gguf)
    assert not cfg.native_tools and cfg.max_tokens == 768
    monkeypatch.setenv("TRIFORGE_LOCAL_MAX_TOKENS", "300")
    assert local_model_config(fake_gguf).max_tokens == 300
    monkeypatch.setenv("TRIFORGE_LOCAL_TOOLS", "native")
    assert local_model_config(fake_gguf).native_tools and local_model_config(fake_gguf).max_tokens is None


def test_text_mode_sends_the_request_unchanged_and_native_mode_reshapes_it(fake_gguf, monkeypatch):
    """Text mode serves the GGUF's template (no HTML escaping); only native mode needs the reshaping."""
    msgs = [{"role": "user", "content": 'Say <b>"hi"</b>'}]
    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}]
    monkeypatch.delenv("TRIFORGE_LOCAL_TOOLS", raising=False)
    text = LocalLLM("local", local_model_config(fake_gguf), share=False)
    body = text.request_body(msgs, None, 0.0, 100, False)
    assert body["messages"] == msgs and "tool_choice" not in body and text.options.chat_format is None
    monkeypatch.setenv("TRIFORGE_LOCAL_TOOLS", "native")
    native = LocalLLM("local", local_model_config(fake_gguf), share=False)
    body = native.request_body(msgs, tools, 0.0, 100, False)
    assert body["tool_choice"] == "auto" and body["messages"][0]["role"] == "system"
    assert native.options.chat_format == "chatml-function-calling"
