"""With the real local model (skipped unless installed): a two-step tool-calling exchange through `LocalLLM`."""

from __future__ import annotations

import pytest
from local_helpers import get_weather, submit

from triforge.core.llm import Completion
from triforge.core.tools import ToolSet
from triforge.local.install import installed_model
from triforge.local.llama_build import missing_llama_modules
from triforge.local.llm import LocalLLM, local_model_config
from triforge.local.server import ServerOptions

# Read before the autouse fixtures point TRIFORGE_HOME at a temporary folder.
REAL_MODEL = installed_model()
MISSING = missing_llama_modules()

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(REAL_MODEL is None, reason="local model not installed (run `triforge local install`)"),
    pytest.mark.skipif(bool(MISSING), reason=f"llama-cpp-python[server] not installed (missing {MISSING})"),
]


@pytest.mark.parametrize("mode", ["text", "native"])
def test_two_step_tool_exchange_with_the_real_model(mode, monkeypatch):
    """Text mode (the default: GGUF template, text protocol) and native mode (chatml-function-calling)."""
    monkeypatch.setenv("TRIFORGE_LOCAL_TOOLS", mode)
    native = mode == "native"
    tools = ToolSet([get_weather, submit])
    cfg = local_model_config(REAL_MODEL)
    llm = LocalLLM("local", cfg, options=ServerOptions(model_path=REAL_MODEL, n_ctx=4096), share=False)
    assert llm.options.chat_format == ("chatml-function-calling" if native else None)
    system = "You are a helpful assistant. Use the tools." + ("" if native else "\n\n" + tools.text_protocol())
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": "What is the weather in Paris? Call get_weather."}]
    schemas = tools.schemas() if native else None
    with llm:
        first = llm.complete(messages, tools=schemas, max_tokens=128, temperature=0.0)
        calls = tools.parse(first, native=native)  # a FormatError fails the test
        assert calls[0].tool.name == "get_weather" and "paris" in calls[0].arguments["city"].lower()
        assert "&lt;" not in (first.content or "") and "&#34;" not in (first.content or "")
        result = calls[0].tool(**calls[0].arguments)
        if native:  # the way the agent loop sends it back (content "" when it was null) plus the result
            assert first.message()["content"] is not None
            messages.append(Completion(first.content, first.tool_calls).message() if first.tool_calls else
                            {"role": "assistant", "content": first.content or ""})
            messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": result})
        else:
            messages.append({"role": "assistant", "content": first.content or ""})
            messages.append({"role": "user", "content": f'<tool_response name="get_weather">\n{result}\n</tool_response>'})
        second = llm.complete(messages, tools=schemas, max_tokens=128, temperature=0.0)
        assert second.content or second.tool_calls  # the server accepted the history and answered
        assert second.usage.input_tokens > first.usage.input_tokens
        server = llm.server
        assert server is not None and server.alive()
    assert llm.server is None and not server.alive()
