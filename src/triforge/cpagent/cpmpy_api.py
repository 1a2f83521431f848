"""The CPMpy global constraints the prompt lists, read from the installed cpmpy so names and arguments are right.

A hand-written list drifts: ours once said `GlobalCardinalityCount(xs, vals, counts)`, the real argument is
`occ`, and a model that trusted the prompt called it with `counts=` and failed on every try.
"""

from __future__ import annotations

import functools
import inspect

GLOBALS = (
    "AllDifferent", "AllDifferentExcept0", "AllEqual", "Circuit", "Inverse", "Table", "Element", "Count",
    "Among", "NValue", "GlobalCardinalityCount", "Increasing", "Decreasing", "Minimum", "Maximum", "Abs",
    "Cumulative", "NoOverlap", "InDomain", "Xor", "IfThenElse",
)


def _signature(cls: type) -> str:
    parts = []
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind is p.VAR_POSITIONAL:
            parts.append("xs")  # these globals take one list (or the items as separate arguments)
        elif p.default is inspect.Parameter.empty:
            parts.append(p.name)
        else:
            parts.append(f"{p.name}={p.default!r}")
    return ", ".join(parts)


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    first = first.split(". ")[0].split(" - ")[0].rstrip(".: ")
    return first if len(first) <= 110 else first[:107].rsplit(" ", 1)[0] + "..."


@functools.lru_cache(maxsize=1)
def globals_reference() -> str:
    """One line per global constraint of the installed cpmpy: `cp.Name(args)`: what it means."""
    import cpmpy as cp

    lines = [f"(cpmpy {cp.__version__})"]
    for name in GLOBALS:
        cls = getattr(cp, name, None)
        if cls is None:
            continue
        summary = _summary(cls)
        lines.append(f"- `cp.{name}({_signature(cls)})`" + (f": {summary}" if summary else ""))
    return "\n".join(lines)
