"""Entry points: what one subsystem offers another, found by name, so the user imports none of its modules.

A provider registers, under a name, the dotted path of a module (loaded on first use, so registering loads
nothing); a user looks the name up and calls the functions the name's contract lists. The contract is
written where it is used (a `typing.Protocol` in the using subsystem), the implementation where it lives:

    register("cpbench", "triforge.cpagent.api")   # cpagent offers CP-Bench (wired in triforge/__init__.py)
    load("cpbench").solve(...)                    # maestro's CP-Bench benchmark runs the agent

Core names no entry point itself, as with `providers`.
"""

from __future__ import annotations

import importlib
from typing import Any

_registry: dict[str, Any] = {}


class EntryPointMissing(LookupError):
    """No entry point of that name is registered."""


def register(name: str, target: Any) -> None:
    """Register `target` (an object, or the dotted path of a module, imported on first `load`) as `name`."""
    _registry[name] = target


def load(name: str) -> Any:
    if name not in _registry:
        raise EntryPointMissing(f"no entry point {name!r} is registered (registered: {', '.join(sorted(_registry)) or 'none'})")
    target = _registry[name]
    if isinstance(target, str):
        target = _registry[name] = importlib.import_module(target)
    return target


def names() -> list[str]:
    return sorted(_registry)
