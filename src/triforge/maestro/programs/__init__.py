"""Seed programs, and `load_program`, which finds a program by seed name, file, or Python factory."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from triforge.maestro.program import Program, ProgramError


def _seeds() -> dict[str, Callable[[], Program]]:
    from triforge.maestro.programs.cpbench import cpbench_seed
    from triforge.maestro.programs.hotpotqa import hotpotqa_seed
    from triforge.maestro.programs.ifbench import ifbench_seed

    return {"hotpotqa": hotpotqa_seed, "ifbench": ifbench_seed, "cpbench": cpbench_seed}


SEED_NAMES = ("hotpotqa", "ifbench", "cpbench")


def seed_program(name: str) -> Program:
    seeds = _seeds()
    if name not in seeds:
        raise ProgramError(f"no seed program {name!r} (seeds: {', '.join(seeds)})")
    return seeds[name]()


def load_program(spec: str) -> Program:
    """A program from `spec`: a seed name, a .json or .toml file, or `module:function` returning a Program."""
    if spec in SEED_NAMES:
        return seed_program(spec)
    path = Path(spec)
    if path.suffix in (".json", ".toml") or path.is_file():
        return Program.load(path)
    if ":" in spec:
        module, _, attr = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ProgramError(f"cannot import program factory {spec!r}: {e}") from None
        prog = _call_factory(spec, factory) if callable(factory) else factory
        if not isinstance(prog, Program):
            raise ProgramError(f"{spec} gave a {type(prog).__name__}, not a Program")
        return prog
    raise ProgramError(f"program {spec!r} is not a seed ({', '.join(SEED_NAMES)}), a .json/.toml file, "
                       f"or module:function")


def _call_factory(spec: str, factory: Callable[..., object]) -> object:
    """`factory()`; one that needs arguments, or fails, is the user's mistake: one line, never a traceback."""
    import inspect

    try:
        needed = [p.name for p in inspect.signature(factory).parameters.values()
                  if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):  # a builtin without a signature: find out by calling it
        needed = []
    if needed:
        raise ProgramError(f"{spec} needs arguments ({', '.join(needed)}); name a function that takes none and "
                           f"returns a Program")
    try:
        return factory()
    except Exception as e:  # noqa: BLE001 - the user's code: report what it raised, in one line
        raise ProgramError(f"{spec}() failed: {type(e).__name__}: {e}; name a function that takes no arguments "
                           f"and returns a Program") from None
