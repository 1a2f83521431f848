"""Real-server quirks (docs/endpoints.md), each against the fake server configured to behave the same way."""

from __future__ import annotations

import json

import pytest
from local_helpers import InProcessServer, chatml_function_calling_emulator, get_weather, submit

from triforge.core.config import ModelConfig
from triforge.core.errors import FormatError
from triforge.core.llm import Completion, OpenAICompatLLM
from triforge.core.react import Agent, AgentConfig, AgentLimits
from triforge.core.tools import ToolSet
from triforge.local.llm import LocalLLM, local_model_config
from triforge.testing.fake_server import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _native_tool_mode(monkeypatch):
    """These quirks belong to native tool mode (`TRIFORGE_LOCAL_TOOLS=native`, the chatml-function-calling format)."""
    monkeypatch.setenv("TRIFORGE_LOCAL_TOOLS", "native")


def local_llm_on(fake: FakeOpenAIServer, tmp_path) -> LocalLLM:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    return LocalLLM("local", local_model_config(gguf), server_factory=lambda: InProcessServer(fake),
                    share=False, sleep=lambda s: None)


def plain_llm_on(fake: FakeOpenAIServer) -> OpenAICompatLLM:
    return OpenAICompatLLM("plain", ModelConfig(model="local", base_url=fake.base_url, max_retries=0))


def test_null_assistant_content_is_sent_as_empty_string(tmp_path):
    """llama.cpp's server rejects `content: null`; a history taken verbatim from an SDK reply has it."""
    call = {"id": "call__0_get_weather_cmpl-1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    history = [{"role": "user", "content": "weather?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": call["id"], "content": "5 degrees"}]
    fake = FakeOpenAIServer(["ok", "ok"], reject_null_content=True)
    with fake, pytest.MonkeyPatch.context():
        assert plain_llm_on(fake).complete(history).content == "ok"
        with local_llm_on(fake, tmp_path) as llm:
            assert llm.complete(history).content == "ok"
    for req in fake.requests:
        assert all(m.get("content") is not None for m in req["messages"])
    # the fake really rejects null content (as the real server does), so the tests above can fail
    with FakeOpenAIServer(["ok"], reject_null_content=True) as strict:
        llm = plain_llm_on(strict)
        with pytest.raises(Exception, match="500"):
            llm._client.chat.completions.create(model="local", messages=history)


def test_missing_assistant_content_is_sent_as_empty_string(tmp_path):
    """llama-cpp-python answers HTTP 500 ('dict object' has no attribute 'content') when the key is absent."""
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    history = [{"role": "user", "content": "weather?"}, {"role": "assistant", "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "c1", "content": "5 degrees"}]
    with FakeOpenAIServer(["ok"]) as fake, local_llm_on(fake, tmp_path) as llm:
        assert llm.complete(history).content == "ok"
    assert fake.requests[0]["messages"][1]["content"] == ""


def test_completion_message_round_trips_with_empty_content():
    comp = Completion(content=None, tool_calls=[])
    assert comp.message() == {"role": "assistant", "content": ""}


def test_unusual_tool_call_ids_and_argument_spacing_parse(tmp_path):
    """The real server's ids are `call__0_<tool>_cmpl-<uuid>`; arguments JSON has spaces inside the braces."""
    tools = ToolSet([get_weather, submit])
    with FakeOpenAIServer(chatml_function_calling_emulator) as fake, local_llm_on(fake, tmp_path) as llm:
        comp = llm.complete([{"role": "user", "content": "weather in Paris?"}], tools=tools.schemas())
    assert comp.content is None and comp.tool_calls[0].id.startswith("call__0_get_weather_cmpl-")
    calls = tools.parse(comp, native=True)
    assert calls[0].arguments == {"city": "Paris"} and calls[0].id == comp.tool_calls[0].id
    assert comp.message()["content"] == ""


@pytest.mark.parametrize("arguments", ['{"city": "Paris"}', '{ "city" : "Paris" }\n', {"city": "Paris"}, ""])
def test_argument_shapes_from_servers(arguments, tmp_path):
    """Arguments as a JSON string with odd whitespace, as an object instead of a string, or empty."""
    step = {"content": None, "tool_calls": [{"id": "x", "name": "get_weather", "arguments": arguments}]}
    tools = ToolSet([get_weather])
    with FakeOpenAIServer([step]) as fake:
        comp = plain_llm_on(fake).complete([{"role": "user", "content": "hi"}], tools=tools.schemas())
    if arguments == "":
        with pytest.raises(FormatError, match="city"):  # {} is missing the required argument
            tools.parse(comp, native=True)
    else:
        assert tools.parse(comp, native=True)[0].arguments == {"city": "Paris"}
        json.loads(comp.tool_calls[0].arguments)


def test_without_tool_choice_the_format_ignores_tools_so_local_sends_auto(tmp_path):
    tools = ToolSet([get_weather, submit])
    msgs = [{"role": "user", "content": "weather in Paris?"}]
    with FakeOpenAIServer(chatml_function_calling_emulator) as fake:
        plain = plain_llm_on(fake).complete(msgs, tools=tools.schemas())
        with local_llm_on(fake, tmp_path) as llm:
            local = llm.complete(msgs, tools=tools.schemas())
    assert plain.tool_calls == [] and "tool_choice" not in fake.requests[0]  # the quirk, reproduced
    assert local.tool_calls and fake.requests[1]["tool_choice"] == "auto"
    assert fake.requests[1]["messages"][0]["role"] == "system"  # tools are only described in a system message
    assert "functions.get_weather: Return the current weather in a city." in fake.requests[1]["messages"][0]["content"]


def _agent(llm) -> Agent:
    return Agent(llm, [get_weather, submit], AgentConfig(limits=AgentLimits(max_steps=4, max_format_errors=2)))


def test_tool_results_reach_the_model_only_as_user_messages(tmp_path):
    """The format drops `role: tool` messages; through `local` the agent still sees the result and submits."""
    with FakeOpenAIServer(chatml_function_calling_emulator) as fake:
        # the same agent on the raw format never submits: without tool_choice it gets no tool calls at all
        raw = _agent(plain_llm_on(fake)).run("What is the weather in Paris?")
        assert not raw.submitted and raw.format_errors >= 2
        with local_llm_on(fake, tmp_path) as llm:
            res = _agent(llm).run("What is the weather in Paris?")
    assert res.submitted and res.output == "18 degrees and sunny in Paris", res.message
    sent = fake.requests[-1]["messages"]
    assert not any(m["role"] == "tool" for m in sent)
    assert any(m["content"].startswith("Result of functions.get_weather:\n18 degrees") for m in sent)


@pytest.mark.parametrize("reply", ["The weather in Paris is probably nice.", ""])
def test_text_reply_where_a_tool_call_was_expected_goes_back_as_format_error(reply, tmp_path):
    """Weak models answer in prose; with tool_choice=auto llama-cpp-python's "message" branch is grammar-bound
    to nothing, so the reply is empty. Either way the loop says so and the next reply (a call) is used."""
    script = [{"content": reply}, {"tool_calls": [{"name": "submit", "arguments": {"answer": "nice"}}]}]
    with FakeOpenAIServer(script) as fake, local_llm_on(fake, tmp_path) as llm:
        res = _agent(llm).run("What is the weather in Paris?")
        assert res.submitted and res.output == "nice" and res.format_errors == 1
        feedback = fake.requests[1]["messages"][-1]
    assert feedback["role"] == "user" and feedback["content"].startswith("Format error: your reply had no tool call")
