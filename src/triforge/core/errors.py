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


class AgentSignal(TriforgeError):
    """Base of the control-flow exceptions handled in one place by the agent loop."""


class Submitted(AgentSignal):
    """A tool handed in the final answer; `output` is what the agent returns."""

    def __init__(self, output: object, message: str = "submitted") -> None:
        super().__init__(message)
        self.output = output


class LimitsExceeded(AgentSignal):
    """A per-agent limit (steps, tokens, cost, wall time, format errors) was reached."""


class BudgetExceeded(AgentSignal):
    """The run's shared budget ledger is spent; the run stops cleanly."""


class FormatError(AgentSignal):
    """The model's reply could not be turned into a valid action; the message goes back to the model."""
