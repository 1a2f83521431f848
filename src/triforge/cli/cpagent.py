"""`triforge cpagent`: commands of the cpagent system."""

from __future__ import annotations

import typer

app = typer.Typer(help="cpagent commands.", no_args_is_help=True)
