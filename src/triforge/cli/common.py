"""Helpers shared by the CLI modules: consoles and the options every command that talks to a model takes."""

from __future__ import annotations

import typer
from rich.console import Console

console = Console()
console_err = Console(stderr=True)

# The model options, defined once: `model: str = ModelOpt, base_url: str = BaseUrlOpt, api_key_env: str = KeyEnvOpt`.
ModelOpt = typer.Option(None, "--model", "-m", help="Model alias from triforge.toml (or a raw name with --base-url).")
BaseUrlOpt = typer.Option(None, "--base-url", help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1.")
KeyEnvOpt = typer.Option(None, "--api-key-env", help="Name of the environment variable that holds the API key.")
ProfileOpt = typer.Option(
    "default", "--profile",
    help="default: what a capable model needs. small-model: aids for weak models (docs/local.md).")
