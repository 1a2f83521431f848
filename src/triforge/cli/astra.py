"""`triforge astra`: commands of the astra system."""

from __future__ import annotations

import typer

app = typer.Typer(help="astra commands.", no_args_is_help=True)
