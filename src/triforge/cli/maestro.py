"""`triforge maestro`: commands of the maestro system."""

from __future__ import annotations

import typer

app = typer.Typer(help="maestro commands.", no_args_is_help=True)
