"""`adapt_chatml_function_calling`: the request reshaping for llama-cpp-python's chatml-function-calling."""

from __future__ import annotations

import copy

from triforge.local.quirks import DEFAULT_SYSTEM, adapt_chatml_function_calling

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Return the weather\n in a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "submit", "parameters": {"type": "object", "properties": {}}}}]
CALL = {"id": "call__0_get_weather_cmpl-1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{ "city": "Paris" }'}}


def test_tools_get_auto_choice_a_system_message_and_descriptions():
    body = {"model": "local", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
    before = copy.deepcopy(body)
    out = adapt_chatml_function_calling(body)
    assert body == before  # pure
    assert out["tool_choice"] == "auto"
    sys_msg = out["messages"][0]
    assert sys_msg["role"] == "system" and sys_msg["content"].startswith(DEFAULT_SYSTEM)
    assert "- functions.get_weather: Return the weather in a city." in sys_msg["content"]
    assert "- functions.submit" in sys_msg["content"]
    assert out["messages"][1:] == body["messages"]


def test_an_explicit_tool_choice_and_system_message_are_kept():
    body = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "x"}],
            "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "submit"}}}
    out = adapt_chatml_function_calling(body)
    assert out["tool_choice"] == body["tool_choice"]
    assert out["messages"][0]["content"].startswith("Be brief.\n\nWhat the functions do:")
    assert len(out["messages"]) == 2


def test_tool_results_become_user_messages_named_after_the_call():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": CALL["id"], "content": "18 degrees"},
            {"role": "tool", "tool_call_id": "unknown", "content": None}]
    out = adapt_chatml_function_calling({"messages": msgs, "tools": TOOLS})
    assert out["messages"][3] == {"role": "user", "content": "Result of functions.get_weather:\n18 degrees"}
    assert out["messages"][4] == {"role": "user", "content": "Function result:\n"}
    assert not any(m["role"] == "tool" for m in out["messages"])


def test_without_tools_only_tool_messages_change():
    body = {"messages": [{"role": "user", "content": "hi"}]}
    out = adapt_chatml_function_calling(body)
    assert out == body and "tool_choice" not in out
