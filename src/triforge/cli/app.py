"""The `triforge` command: one typer app, one module per subsystem."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
from rich.markup import escape

from triforge import __version__
from triforge.cli.common import console_err, group_options
from triforge.cli.lazy import LazyGroup, add_lazy, command_of, group_of, prepare_loaded
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
        os.environ["TRIFORGE_ISOLATION"] = "none"  # read by confine.isolation.IsolationPolicy.from_env


def _needs_extra(why: str):
    def command() -> None:
        raise UserError(f"cpagent needs its extra here ({why}): pip install 'triforge[cpagent]'")

    return command


_CPAGENT_HELP = ("cpagent: turn a constraint problem in plain language into a verified CPMpy model (solve, bench), "
                 "and check reference models and submissions (refs, grade).")
_ASTRA_HELP = ("astra: make CUDA kernels faster with testing, profiling, planning and coding agents, and check, "
               "time and profile candidate kernels.")
_MAESTRO_HELP = "maestro: run and score LLM agent programs (a graph of modules with their config) on benchmarks."


def _module(name: str) -> Any:
    import importlib

    return importlib.import_module(f"triforge.cli.{name}")


def _cpagent() -> Any:
    group = group_of(_module("cpagent").app, _CPAGENT_HELP)
    for name, help in (("solve", "Solve one constraint problem with the agent; a CP-Bench problem is graded "
                                 "strictly on every instance."),
                       ("bench", "Run the agent on every problem (x seeds) in parallel, grade strictly, write "
                                 "reports.")):
        add_lazy(group, name, help, lambda name=name: _agent_command(name))
    return group


def _agent_command(name: str) -> Any:
    try:  # without the sandbox extra the other systems still start; solve/bench then say what is missing
        return command_of(getattr(_module("cpagent_agent"), name))
    except ImportError as exc:
        single = typer.Typer()
        single.command(name, help=f"Unavailable here: {exc}.")(_needs_extra(str(exc)))
        return typer.main.get_command(single)


def _maestro() -> Any:
    from triforge.maestro.programs import SEED_NAMES

    return group_of(_module("maestro").app, f"{_MAESTRO_HELP} Built-in programs: {', '.join(SEED_NAMES)} "
                                            "(`maestro show NAME` prints one).")


def _local() -> Any:
    try:
        return group_of(_module("local").app)
    except ImportError:
        return None


def _register(root: Any) -> None:
    """Every sub-command, listed with one line of help and imported only when the command line names it."""
    add_lazy(root, "llm", "Talk to an LLM endpoint, check it, or serve a fake one.",
             lambda: group_of(_module("llm").app))
    add_lazy(root, "trace", "Read a run's trace: HTML view and summary.", lambda: group_of(_module("trace").app))
    add_lazy(root, "data", "The benchmarks' data sets: list, locate, verify, fetch newer upstream versions.",
             lambda: group_of(_module("data").app))
    add_lazy(root, "demo", "Run a small ReAct agent against a scripted fake endpoint; leaves a full run directory.",
             lambda: command_of(_module("demo").demo))
    add_lazy(root, "doctor", "Start a sandboxed kernel and a one-shot program and print the isolation each "
             "really has.", lambda: command_of(_module("doctor").doctor))
    add_lazy(root, "cpagent", _CPAGENT_HELP, _cpagent)
    add_lazy(root, "astra", _ASTRA_HELP, lambda: group_of(_module("astra").app, _ASTRA_HELP))
    add_lazy(root, "maestro", _MAESTRO_HELP, _maestro)
    add_lazy(root, "local", "The embedded local model (Qwen2.5-Coder-1.5B on llama.cpp): install, serve, status, "
             "stop.", _local)


class _Root(LazyGroup):
    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _register(self)


app.info.cls = _Root


def command(eager: bool = False) -> Any:
    """The app as a click command whose --help shows no `<bool>` type on flags (a flag takes no value).

    Sub-commands are imported when named (cli.lazy); `eager` imports them all (help checks)."""
    from triforge.cli.suggest import suggest_closest

    cmd = typer.main.get_command(app)
    _hide_flag_types(cmd)
    suggest_closest(cmd)
    group_options(cmd)  # every option in a help section
    prepare_loaded(cmd, _hide_flag_types, suggest_closest, group_options)
    if eager:
        cmd.load_all()
    return cmd


def _hide_flag_types(cmd: Any) -> None:
    for p in [*cmd.params, cmd.get_help_option(typer.Context(cmd))]:
        if getattr(p, "is_flag", False):
            p.metavar = ""
    for sub in getattr(cmd, "commands", {}).values():
        _hide_flag_types(sub)


def main(argv: list[str] | None = None) -> None:
    from triforge.cli import environment, invocation

    args = argv if argv is not None else sys.argv[1:]
    debug = "--debug" in args or os.environ.get("TRIFORGE_DEBUG") == "1"
    try:
        environment.check_for(args)
        command()(args=argv, standalone_mode=True)
    except UserError as e:
        if debug:
            raise
        console_err.print(f"[bold red]error:[/] {escape(invocation.runnable(str(e)))}", highlight=False,
                          soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        console_err.print("[yellow]interrupted[/]")
        sys.exit(130)
    except OSError as e:
        # A path the user named that cannot be read or written (an output file in a folder that is not there or
        # not writable, a full disk): one line naming it; anything else is a bug and keeps its traceback.
        if debug or not e.filename:
            raise
        where = f"{e.filename}" + (f" -> {e.filename2}" if e.filename2 else "")
        console_err.print(f"[bold red]error:[/] {escape(where)}: {escape(e.strerror or type(e).__name__)}",
                          highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
