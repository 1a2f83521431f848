"""The `triforge` command: one typer app, one module per subsystem."""

from __future__ import annotations

import os
import sys
from typing import Any

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
    isolation: str = typer.Option("auto", "--isolation", help="auto: confine model-written code (refused where "
                                  "that is impossible); none: run it unprotected. See `triforge doctor`."),
) -> None:
    if debug:
        os.environ["TRIFORGE_DEBUG"] = "1"
    if isolation not in ("auto", "none"):
        raise UserError(f"--isolation {isolation}: use auto (the default) or none")
    if isolation == "none":
        os.environ["TRIFORGE_ISOLATION"] = "none"  # read by core.isolation.IsolationPolicy.from_env


def _needs_extra(why: str):
    def command() -> None:
        raise UserError(f"cpagent needs its extra here ({why}): pip install 'triforge[cpagent]'")

    return command


def _register() -> None:
    from triforge.cli import demo as demo_cli
    from triforge.cli import doctor as doctor_cli
    from triforge.cli import llm as llm_cli
    from triforge.cli import trace as trace_cli

    app.add_typer(llm_cli.app, name="llm")
    app.add_typer(trace_cli.app, name="trace")
    app.command("demo")(demo_cli.demo)
    app.command("doctor")(doctor_cli.doctor)
    try:  # without the sandbox extra the other systems still start; solve/bench then say what is missing
        from triforge.cli import cpagent_agent

        cpagent_cli.app.command("solve")(cpagent_agent.solve)
        cpagent_cli.app.command("bench")(cpagent_agent.bench)
    except ImportError as exc:
        for name in ("solve", "bench"):
            cpagent_cli.app.command(name, help=f"Unavailable here: {exc}.")(_needs_extra(str(exc)))
    from triforge.maestro.programs import SEED_NAMES

    app.add_typer(cpagent_cli.app, name="cpagent",
                  help="cpagent: turn a constraint problem in plain language into a verified CPMpy model "
                       "(solve, bench), and check reference models and submissions (refs, grade).")
    app.add_typer(astra_cli.app, name="astra",
                  help="astra: make CUDA kernels faster with testing, profiling, planning and coding agents, "
                       "and check, time and profile candidate kernels.")
    app.add_typer(maestro_cli.app, name="maestro",
                  help="maestro: run and score LLM agent programs (a graph of modules with their config) on "
                       f"benchmarks. Built-in programs: {', '.join(SEED_NAMES)} (`maestro show NAME` prints one).")
    try:
        from triforge.cli import local as local_cli
    except ImportError:
        return
    app.add_typer(local_cli.app, name="local")


_register()


def command() -> Any:
    """The app as a click command whose --help shows no `<bool>` type on flags (a flag takes no value)."""
    cmd = typer.main.get_command(app)
    _hide_flag_types(cmd)
    return cmd


def _hide_flag_types(cmd: Any) -> None:
    for p in [*cmd.params, cmd.get_help_option(typer.Context(cmd))]:
        if getattr(p, "is_flag", False):
            p.metavar = ""
    for sub in getattr(cmd, "commands", {}).values():
        _hide_flag_types(sub)


def main(argv: list[str] | None = None) -> None:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:]) or os.environ.get("TRIFORGE_DEBUG") == "1"
    try:
        command()(args=argv, standalone_mode=True)
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
