"""Suggestions for a mistyped option: the command's closest real options, or none.

click compares whole option strings, so the `--` every long option starts with counts as a match and a
short option such as `--out` comes out "close" to almost anything (`--budget` gave `--out`). Here the names
are compared without their dashes, a name the typed word begins or is a part of counts as close, and
hidden options are never offered.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any

from typer._click.exceptions import NoSuchOption

CUTOFF = 0.6


def closest_options(typed: str, options: list[str], n: int = 3) -> list[str]:
    """Up to `n` of `options` (long ones, `--name`) closest to `typed`, best first."""
    word = typed.lstrip("-").lower()
    scored: list[tuple[float, str]] = []
    for opt in options:
        if not opt.startswith("--") or not word:
            continue
        name = opt[2:].lower()
        ratio = SequenceMatcher(None, word, name).ratio()
        part = word in name.split("-") or (len(word) >= 3 and name.startswith(word))
        if ratio >= CUTOFF or part:
            scored.append((ratio + part, opt))
    return [opt for _, opt in sorted(scored, key=lambda s: (-s[0], s[1]))[:n]]


def suggest_closest(cmd: Any) -> None:
    """Make `cmd`'s parser (and its subcommands') answer an unknown long option with `closest_options`."""
    make_parser = cmd.make_parser

    def make(ctx: Any) -> Any:
        parser = make_parser(ctx)
        match = parser._match_long_opt
        shown = [o for p in cmd.get_params(ctx) if not getattr(p, "hidden", False) for o in p.opts]

        def match_long(opt: str, explicit_value: str | None, state: Any) -> None:
            try:
                match(opt, explicit_value, state)
            except NoSuchOption as e:
                raise NoSuchOption(opt, possibilities=closest_options(opt, shown), ctx=e.ctx) from None

        parser._match_long_opt = match_long
        return parser

    cmd.make_parser = make
    for sub in getattr(cmd, "commands", {}).values():
        suggest_closest(sub)
