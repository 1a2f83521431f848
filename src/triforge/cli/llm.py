"""`triforge llm`: talk to an endpoint, check it, or serve a fake one."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from triforge.cli.common import BaseUrlOpt, KeyEnvOpt, ModelOpt, console, console_err
from triforge.core.capabilities import describe, toml_hint
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
    u = comp.usage
    details = (f" ({u.reasoning_tokens} reasoning)" if u.reasoning_tokens else "") + (
        f", {u.cached_input_tokens} cached in" if u.cached_input_tokens else "")
    console_err.print(
        f"[dim]{llm.alias} ({comp.model}): {u.input_tokens} in, {u.output_tokens} out{details}, "
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
    """Check an endpoint: does it answer, make native tool calls, refuse parameters, return reasoning?

    The probes send what triforge's own paths send (a reply cap, temperature 0, a stop string); what the
    server refuses is learned and adapted, and the alias lines that declare it are printed at the end.
    """
    llm = get_llm(model, base_url=base_url, api_key_env=api_key_env)
    caps = getattr(llm, "capabilities", None)
    cap = 1024 if caps is not None and caps.reasoning else 16  # a reasoning model thinks inside the cap
    t0 = time.perf_counter()
    comp = llm.complete([{"role": "user", "content": "Reply with the single word: pong"}], max_tokens=cap,
                        temperature=0.0, stop=["\n\n\n"])
    console.print(f"[green]ok[/] {llm.alias} at {llm.config.base_url}: replied {comp.content!r:.60} "
                  f"in {time.perf_counter() - t0:.2f} s")
    text, tokens = bool(comp.reasoning), comp.usage.reasoning_tokens
    tools = ToolSet([_get_time])
    comp = llm.complete(
        [{"role": "user", "content": "What time is it in Paris? Use the get_time tool."}],
        tools=tools.schemas(), max_tokens=cap * 8,
    )
    text, tokens = text or bool(comp.reasoning), max(tokens, comp.usage.reasoning_tokens)
    native = True
    try:
        calls = tools.parse(comp, native=True)
        how = "native tool call" if comp.tool_calls else "tool call leaked into content (recovered)"
        console.print(f"[green]ok[/] tool calling: {how}: get_time({json.dumps(calls[0].arguments)})")
    except FormatError as e:
        native = False
        advice = ("set native_tools = false for this alias to use the text protocol" if llm.config.native_tools else
                  "this alias already uses triforge's text protocol (native_tools = false), which needs none")
        console.print(f"[yellow]no native tool call[/]: {e}; {advice}")
    _report_capabilities(llm, native, text, tokens, comp)


def _report_capabilities(llm, native: bool, text: bool, tokens: int, comp) -> None:
    """What the probes found out, and the triforge.toml lines that declare it."""
    refused = llm.refused() if hasattr(llm, "refused") else {}
    caps = getattr(llm, "capabilities", None)
    for param, action in refused.items():
        console.print(f"[yellow]refused[/] {param!r}: {describe(param, action)}", highlight=False)
    if not refused:
        console.print("[green]ok[/] no parameter refused (max_tokens, temperature, stop)"
                      + (f"; {caps.family} defaults applied" if caps is not None and caps.family else ""))
    u = comp.usage
    console.print(f"reasoning: thinking text {'returned (kept apart, never run)' if text else 'not returned'}"
                  + (f", {tokens} reasoning tokens reported" if tokens else "")
                  + (f"; {u.cached_input_tokens} cached input tokens reported" if u.cached_input_tokens else ""),
                  highlight=False)
    cfg = llm.config
    lines = [f"[models.{llm.alias}]", f'model = "{cfg.model}"', f'base_url = "{cfg.base_url}"']
    if cfg.api_key_env:
        lines.append(f'api_key_env = "{cfg.api_key_env}"')
    if cfg.api_type == "azure":
        lines += ['api_type = "azure"', f'api_version = "{cfg.api_version}"',
                  f'deployment = "{cfg.deployment or cfg.model}"']
    if not native:
        lines.append("native_tools = false")
    if (text or tokens) and not (caps is not None and caps.reasoning):
        lines.append("reasoning = true")
    lines += [hint for param, action in refused.items() if (hint := toml_hint(param, action))]
    console.print("alias lines for triforge.toml:", highlight=False)
    typer.echo("\n".join(lines))


@app.command("serve-fake")
def serve_fake(
    script: Path = typer.Option(..., "--script", help="JSON list of reply steps (\"text\" or {\"content\": ..., "
                                "\"tool_calls\": [{\"name\": ..., \"arguments\": {...}}]}), or a .py file with "
                                "`script`/`reply`."),
    port: int = typer.Option(0, "--port", help="Port on 127.0.0.1 (0 picks a free one)."),
    delay: float = typer.Option(0.0, "--delay", help="Seconds to wait before every reply."),
    log: Path = typer.Option(None, "--log", help="Append every request to this JSONL file."),
    strict: str = typer.Option(None, "--strict", help="Behave as one family of endpoints: openai-reasoning, "
                               "vllm-reasoning, deepseek, think-tags, azure (join several with +)."),
) -> None:
    """Serve a scripted fake OpenAI-compatible endpoint on loopback until Ctrl-C."""
    from triforge.core.errors import UserError
    from triforge.testing.fake_server import FakeOpenAIServer, load_script

    steps = load_script(script)
    try:
        srv = FakeOpenAIServer(steps, port=port, delay_s=delay, log_path=log, strict=strict)
    except ValueError as e:
        raise UserError(f"--strict: {e}") from None
    except OSError as e:
        raise EndpointError(f"cannot listen on 127.0.0.1:{port}: {e.strerror}; pick another --port") from None
    console.print(f"fake OpenAI-compatible server at [bold]{srv.base_url}[/] (scripted replies; Ctrl-C stops)")
    try:
        srv.httpd.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        srv.httpd.server_close()
