"""Helpers shared by the CLI modules."""

from __future__ import annotations

from rich.console import Console

console = Console()
console_err = Console(stderr=True)
