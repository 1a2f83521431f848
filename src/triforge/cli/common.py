"""Helpers shared by the CLI modules: consoles, the option groups run commands share, and old spellings.

Options are defined once here and shown in help panels (typer's `rich_help_panel`), so every run
command's `--help` reads in the same sections. `group_options` puts any option a command defines
itself into a section by its name (`Input` when it names none), so no command's help is one flat list.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from triforge.core.errors import UserError

# soft_wrap: a message is never broken into lines here (a terminal folds it for the eye only), so a path or a
# command in it stays whole when the output goes to a file or a pipe; tables keep their own widths.
console = Console(soft_wrap=True)
console_err = Console(stderr=True, soft_wrap=True)

MODEL, LIMITS, RUN_DIR, FAN_OUT, ISOLATION, INPUT, OUTPUT, GENERAL = (
    "Model", "Limits", "Run directory", "Fan-out", "Isolation", "Input", "Output", "General")

# The model options: `model: str = ModelOpt, base_url: str = BaseUrlOpt, api_key_env: str = KeyEnvOpt`.
ModelOpt = typer.Option(None, "--model", "-m", help="Model alias from triforge.toml (or a raw name with --base-url).",
                        rich_help_panel=MODEL)
BaseUrlOpt = typer.Option(None, "--base-url", help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1.",
                          rich_help_panel=MODEL)
KeyEnvOpt = typer.Option(None, "--api-key-env", help="Name of the environment variable that holds the API key.",
                         rich_help_panel=MODEL)
ProfileOpt = typer.Option(
    "default", "--profile", rich_help_panel=MODEL,
    help="default: what a capable model needs. small-model: aids for weak models (docs/local.md).")

# Where fan-out runs (problems, examples, rollouts): `executor: str = ExecutorOpt, ray_address: str = RayAddressOpt`.
ExecutorOpt = typer.Option("local", "--executor", rich_help_panel=FAN_OUT,
                           help="local: threads on this machine. ray: tasks on a Ray cluster (docs/executor.md).")
RayAddressOpt = typer.Option(None, "--ray-address", rich_help_panel=FAN_OUT,
                             help="An existing Ray cluster (HOST:PORT of `ray start --head`); default with "
                                  "--executor ray: a Ray instance started here, on loopback only.")

# The run directory.
CacheOpt = typer.Option(None, "--cache", rich_help_panel=RUN_DIR,
                        help="Response cache: off, rw or replay (default: triforge.toml's `cache`).")
FreshOpt = typer.Option(False, "--fresh", rich_help_panel=RUN_DIR,
                        help="Start afresh: earlier contents of --out are moved into --out/previous-<time>/ "
                             "(nothing is deleted).")

# Limits every run command spells the same way.
MaxCallsOpt = typer.Option(None, "--max-calls", min=1, rich_help_panel=LIMITS,
                           help="LLM calls of every kind the command sends; checked before each call.")
MaxUsdOpt = typer.Option(None, "--max-usd", rich_help_panel=LIMITS,
                         help="USD (from the alias's prices): no call starts once it is reached.")

# Option names (as a command spells them) and the section they belong in, for options a command defines itself.
SECTIONS: dict[str, str] = {
    **dict.fromkeys(("--model", "--base-url", "--api-key-env", "--profile", "--reflection-model", "--role-model",
                     "--module-models", "--single-agent", "--project-prompt", "--no-fresh-check"), MODEL),
    **dict.fromkeys(("--max-calls", "--max-rollouts", "--max-usd", "--budget-usd", "--max-tokens", "--max-cost",
                     "--max-wall", "--max-wall-s", "--max-steps", "--max-evaluations", "--max-input-tokens",
                     "--max-output-tokens", "--patience", "--rounds", "--candidates", "--repairs", "--timeout",
                     "--limit", "--limits"), LIMITS),
    **dict.fromkeys(("--out", "--cache", "--fresh", "--html", "--evaluate-later"), RUN_DIR),
    **dict.fromkeys(("--executor", "--ray-address", "--jobs", "--gpus", "--workers"), FAN_OUT),
    **dict.fromkeys(("--isolation",), ISOLATION),
    **dict.fromkeys(("--json", "--format", "--quiet", "--verbose"), OUTPUT),
    **dict.fromkeys(("--debug", "--version"), GENERAL),
}


def group_options(cmd: Any) -> None:
    """Give every option of `cmd` and its subcommands a help section: its own, else by name, else Input."""
    helper = cmd.get_help_option(typer.Context(cmd)) if hasattr(cmd, "get_help_option") else None
    for p in [*getattr(cmd, "params", []), *([helper] if helper is not None else [])]:
        if getattr(p, "param_type_name", "") != "option" or getattr(p, "rich_help_panel", None):
            continue
        p.rich_help_panel = GENERAL if p is helper else next((SECTIONS[o] for o in p.opts if o in SECTIONS), INPUT)
    for sub in getattr(cmd, "commands", {}).values():
        group_options(sub)


def renamed(new: Any, old: Any, new_name: str, old_name: str, *, default: Any = None) -> Any:
    """The value of an option given under its new name or its old, hidden one (kept for one release)."""
    if old is not None and old != default:
        if new is not None and new != default and new != old:
            raise UserError(f"{old_name} is the old name of {new_name}: give one of them")
        console_err.print(f"note: {old_name} is now {new_name}; the old name goes in the next release",
                          highlight=False, markup=False)
        return old
    return new


@contextlib.contextmanager
def fan_out(kind: str, address: str | None) -> Iterator[None]:
    """Run the block's fan-out on the executor the options name; closed (a Ray started here stops) after."""
    from triforge.executors import local as executor

    ex = executor.make_executor(kind, address=address)
    try:
        with executor.use(ex):
            yield
    finally:
        ex.close()


DEFAULT_OUT_HELP = ("Run directory (default: runs/NAME-YYYYmmdd-HHMMSS, NAME the problem, task or benchmark); "
                    "re-running with the same --out resumes.")


def default_out(name: str) -> Path:
    """The run directory a run command uses without --out: `runs/<name>-<YYYYmmdd-HHMMSS>` (local time)."""
    import re
    import time

    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "run"
    return Path("runs") / f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}"
