"""`triforge llm`."""

from __future__ import annotations

import typer

app = typer.Typer(help="llm commands.", no_args_is_help=True)
