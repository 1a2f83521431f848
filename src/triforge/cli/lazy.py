"""Sub-commands imported only when they run: `triforge --version` and `--help` start without the subsystems.

A `LazyGroup` lists a placeholder (name and one line of help) for each lazy sub-command; the module
behind it is imported when the command line names it (`resolve_command`), and the placeholder is then
replaced by the real command or group. Help listings read the placeholders, so they import nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer.core

Loader = Callable[[], Any]  # returns the click command or group to run


class LazyGroup(typer.core.TyperGroup):
    """`lazy`: name -> loader of the commands not imported yet; `prepare`: what is done to each loaded one
    (the root's help and option-suggestion fixes), handed down to lazy groups below it."""

    def load(self, name: str) -> None:
        lazy: dict[str, Loader] = self.__dict__.setdefault("lazy", {})
        if name not in lazy:
            return
        real = lazy.pop(name)()
        if real is None:
            self.commands.pop(name, None)
            return
        real.name = name
        for prepare in self.__dict__.get("prepare", ()):
            prepare(real)
        if isinstance(real, LazyGroup):
            real.__dict__["prepare"] = self.__dict__.get("prepare", [])
        self.commands[name] = real

    def load_all(self) -> None:
        """Import every lazy command, down the whole tree (for help checks and docs)."""
        for name in list(self.__dict__.get("lazy", {})):
            self.load(name)
        for sub in self.commands.values():
            if isinstance(sub, LazyGroup):
                sub.load_all()

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        if args:
            self.load(args[0])
        return super().resolve_command(ctx, args)


def prepare_loaded(group: Any, *steps: Callable[[Any], None]) -> None:
    """Apply `steps` to each command of `group` when it is imported (and below it)."""
    if isinstance(group, LazyGroup):
        group.__dict__["prepare"] = list(steps)


def add_lazy(group: Any, name: str, help: str, load: Loader) -> None:
    """List `name` in `group` (made a LazyGroup if it is a plain TyperGroup) and import it with `load` when run."""
    if type(group) is typer.core.TyperGroup:
        group.__class__ = LazyGroup
    group.__dict__.setdefault("lazy", {})[name] = load
    group.commands[name] = typer.core.TyperCommand(name=name, help=help, rich_help_panel=None)


def group_of(app: typer.Typer, help: str | None = None) -> Any:
    """The click group of a typer app, with `help` in place of its own where given."""
    group = typer.main.get_group(app)
    if help is not None:
        group.help = help
    return group


def command_of(function: Callable[..., Any]) -> Any:
    """The click command of one typer command function."""
    single = typer.Typer()
    single.command()(function)
    return typer.main.get_command(single)
