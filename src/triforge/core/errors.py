"""Exceptions shared across triforge.

`UserError` and its subclasses are problems with what the user gave (config, paths,
endpoints): the CLI prints their message on one line and exits with code 2.
The control-flow exceptions of the agent loop live in `triforge.core.react`.
"""

from __future__ import annotations


class TriforgeError(Exception):
    """Base class for every error triforge raises on purpose."""


class UserError(TriforgeError):
    """Bad input from the user: printed as one line, exit code 2."""

    exit_code = 2


class ConfigError(UserError):
    """A malformed or inconsistent configuration."""


class EndpointError(UserError):
    """An LLM endpoint that cannot be used: unreachable, bad key, unknown model, exhausted retries."""
