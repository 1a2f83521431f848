"""The line every run that executes model-written code prints first: how that code is confined here.

The same record goes into the run's config.json and its trace (`triforge.confine.record`); printing it at
the start means a user never has to open the trace to learn whether the code ran isolated.
"""

from __future__ import annotations

from triforge.cli.common import console
from triforge.cli.invocation import runnable


def announce_isolation(held: str | None = None, what: str = "model-written code") -> str:
    """Print `isolation of <what>: <held>`; without `held`, probe what holds here for the environment's policy
    (raises `IsolationUnavailable`, one line, where nothing can isolate and isolation was not turned off)."""
    if held is None:
        from triforge.confine.isolation import IsolationPolicy
        from triforge.confine.record import isolation_record

        held = str(isolation_record(IsolationPolicy.from_env())["held"])
    style = "bold red" if held.startswith("NOT") else None
    console.print(runnable(f"isolation of {what}: {held}"), style=style, highlight=False, markup=False)
    return held
