"""The fake server's script format: the OpenAI tool-call shape is accepted, a bad script is named as such."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from triforge.core.config import ModelConfig
from triforge.core.errors import EndpointError, UserError
from triforge.core.llm import OpenAICompatLLM
from triforge.testing.fake_server import FakeOpenAIServer, load_script

HELLO = [{"role": "user", "content": "hi"}]
OPENAI_SHAPED = {"content": None, "tool_calls": [
    {"id": "call_7", "type": "function", "function": {"name": "submit", "arguments": '{"answer": "42"}'}}]}


def _llm(srv: FakeOpenAIServer) -> OpenAICompatLLM:
    return OpenAICompatLLM("fake", ModelConfig(model="m", base_url=srv.base_url, max_retries=0, timeout_s=5))


def test_openai_shaped_tool_calls_are_served():
    with FakeOpenAIServer([OPENAI_SHAPED, {"tool_calls": [{"name": "look", "arguments": {"at": "x"}}]}]) as srv:
        llm = _llm(srv)
        first, second = llm.complete(HELLO), llm.complete(HELLO)
    [tc] = first.tool_calls
    assert (tc.id, tc.name, json.loads(tc.arguments)) == ("call_7", "submit", {"answer": "42"})
    assert (second.tool_calls[0].name, json.loads(second.tool_calls[0].arguments)) == ("look", {"at": "x"})
    assert srv.errors == []


@pytest.mark.parametrize("bad, says", [
    ({"tool_calls": [{"arguments": {}}]}, "step 2.tool_calls[0] has no name"),
    ({"tool_calls": {"name": "x"}}, "step 2.tool_calls must be a list"),
    ({"contents": "typo"}, "step 2 has unknown key(s) contents"),
    (7, "step 2 is int"),
])
def test_a_bad_script_file_is_reported_naming_the_step(tmp_path, bad, says):
    p = tmp_path / "script.json"
    p.write_text(json.dumps(["fine", bad]))
    with pytest.raises(UserError, match=r"bad script .*script.json: " + says.replace("[", r"\[").replace("(", r"\(")
                       .replace(")", r"\)")):
        load_script(p)


def test_serve_fake_with_a_bad_script_is_one_line_exit_2(tmp_path):
    p = tmp_path / "script.json"
    p.write_text(json.dumps([{"tool_calls": [{"function": {"arguments": "{}"}}]}]))
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "llm", "serve-fake", "--script", str(p)],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "bad script" in r.stderr and "tool_calls[0] has no name" in r.stderr


def test_a_reply_function_giving_a_bad_step_is_reported_to_the_client_as_a_bad_script():
    with FakeOpenAIServer(lambda body: {"tool_calls": [{"nam": "typo"}]}) as srv:
        with pytest.raises(EndpointError, match="bad script step 1.tool_calls.0. has no name"):
            _llm(srv).complete(HELLO)
    assert srv.errors and "has no name" in srv.errors[0]
