"""Test doubles shipped with triforge: a strict scripted model and a fake OpenAI-compatible server."""

from triforge.testing.fake_server import FakeOpenAIServer
from triforge.testing.scripted import ScriptedLLM, ScriptError, call

__all__ = ["FakeOpenAIServer", "ScriptError", "ScriptedLLM", "call"]
