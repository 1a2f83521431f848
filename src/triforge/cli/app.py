"""The `triforge` command: one typer app, one module per subsystem."""

from __future__ import annotations

import os
import sys

import typer
from rich.markup import escape

from triforge import __version__
from triforge.cli import astra as astra_cli
from triforge.cli import cpagent as cpagent_cli
from triforge.cli import maestro as maestro_cli
from triforge.cli.common import console_err
from triforge.core.errors import UserError

app = typer.Typer(
    name="triforge",
    help="astra, maestro and cpagent: three LLM-agent systems on one core.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"triforge {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    if debug:
        os.environ["TRIFORGE_DEBUG"] = "1"


def _register() -> None:
    from triforge.cli import demo as demo_cli
    from triforge.cli import llm as llm_cli
    from triforge.cli import trace as trace_cli

    app.add_typer(llm_cli.app, name="llm")
    app.add_typer(trace_cli.app, name="trace")
    app.command("demo")(demo_cli.demo)
    from triforge.cli import cpagent_agent

    cpagent_cli.app.command("solve")(cpagent_agent.solve)
    cpagent_cli.app.command("bench")(cpagent_agent.bench)
    app.add_typer(cpagent_cli.app, name="cpagent")
    app.add_typer(astra_cli.app, name="astra")
    app.add_typer(maestro_cli.app, name="maestro")
    try:
        from triforge.cli import local as local_cli
    except ImportError:
        return
    app.add_typer(local_cli.app, name="local")


_register()


def main(argv: list[str] | None = None) -> None:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:]) or os.environ.get("TRIFORGE_DEBUG") == "1"
    try:
        app(args=argv, standalone_mode=True)
    except UserError as e:
        if debug:
            raise
        console_err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        console_err.print("[yellow]interrupted[/]")
        sys.exit(130)


if __name__ == "__main__":
    main()
