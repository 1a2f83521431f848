"""Helpers shared by the CLI modules: consoles and the options every command that talks to a model takes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

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

# Where fan-out runs (problems, examples, rollouts): `executor: str = ExecutorOpt, ray_address: str = RayAddressOpt`.
ExecutorOpt = typer.Option("local", "--executor",
                           help="local: threads on this machine. ray: tasks on a Ray cluster (docs/executor.md).")
RayAddressOpt = typer.Option(None, "--ray-address",
                             help="An existing Ray cluster (HOST:PORT of `ray start --head`); default with "
                                  "--executor ray: a Ray instance started here, on loopback only.")


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
