"""`triforge llm`: talk to an endpoint, check it, or serve a fake one."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from triforge.cli.common import BaseUrlOpt, KeyEnvOpt, ModelOpt, console, console_err
from triforge.core.errors import EndpointError, FormatError, Submitted
from triforge.core.llm import get_llm
from triforge.core.tools import ToolSet, tool

app = typer.Typer(help="Talk to an LLM endpoint, check it, or serve a fake one.", no_args_is_help=True)



@app.command()
def chat(
    prompt: str = typer.Argument(..., help="The user message."),
    model: str = ModelOpt,
    base_url: str = BaseUrlOpt,
    api_key_env: str = KeyEnvOpt,
    system: str = typer.Option(None, "--system", help="Optional system message."),
    max_tokens: int = typer.Option(None, "--max-tokens"),
) -> None:
    """Send one prompt and print the reply (usage on stderr)."""
    llm = get_llm(model, base_url=base_url, api_key_env=api_key_env)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    t0 = time.perf_counter()
    comp = llm.complete(messages, max_tokens=max_tokens)
    typer.echo(comp.content or "")
    console_err.print(
        f"[dim]{llm.alias} ({comp.model}): {comp.usage.input_tokens} in, {comp.usage.output_tokens} out, "
        f"${comp.cost_usd:.5f}, {time.perf_counter() - t0:.2f} s[/]"
    )


@tool(name="get_time")
def _get_time(city: str) -> str:
    """Return the current time in a city.

    Args:
        city: the city name
    """
    raise Submitted(city)


@app.command()
def ping(
    model: str = ModelOpt,
    base_url: str = BaseUrlOpt,
    api_key_env: str = KeyEnvOpt,
) -> None:
    """Check that an endpoint answers, and whether the model makes native tool calls."""
    llm = get_llm(model, base_url=base_url, api_key_env=api_key_env)
    t0 = time.perf_counter()
    comp = llm.complete([{"role": "user", "content": "Reply with the single word: pong"}], max_tokens=16)
    console.print(f"[green]ok[/] {llm.alias} at {llm.config.base_url}: replied {comp.content!r:.60} "
                  f"in {time.perf_counter() - t0:.2f} s")
    tools = ToolSet([_get_time])
    comp = llm.complete(
        [{"role": "user", "content": "What time is it in Paris? Use the get_time tool."}],
        tools=tools.schemas(), max_tokens=128,
    )
    try:
        calls = tools.parse(comp, native=True)
        how = "native tool call" if comp.tool_calls else "tool call leaked into content (recovered)"
        console.print(f"[green]ok[/] tool calling: {how}: get_time({json.dumps(calls[0].arguments)})")
    except FormatError as e:
        console.print(f"[yellow]no tool call[/]: {e}; set native_tools = false for this alias to use the text protocol")


@app.command("serve-fake")
def serve_fake(
    script: Path = typer.Option(..., "--script", help="JSON list of reply steps (\"text\" or {\"content\": ..., "
                                "\"tool_calls\": [{\"name\": ..., \"arguments\": {...}}]}), or a .py file with "
                                "`script`/`reply`."),
    port: int = typer.Option(0, "--port", help="Port on 127.0.0.1 (0 picks a free one)."),
    delay: float = typer.Option(0.0, "--delay", help="Seconds to wait before every reply."),
    log: Path = typer.Option(None, "--log", help="Append every request to this JSONL file."),
) -> None:
    """Serve a scripted fake OpenAI-compatible endpoint on loopback until Ctrl-C."""
    from triforge.testing.fake_server import FakeOpenAIServer, load_script

    steps = load_script(script)
    try:
        srv = FakeOpenAIServer(steps, port=port, delay_s=delay, log_path=log)
    except OSError as e:
        raise EndpointError(f"cannot listen on 127.0.0.1:{port}: {e.strerror}; pick another --port") from None
    console.print(f"fake OpenAI-compatible server at [bold]{srv.base_url}[/] (scripted replies; Ctrl-C stops)")
    try:
        srv.httpd.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        srv.httpd.server_close()
