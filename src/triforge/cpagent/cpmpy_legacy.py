"""CPMpy names older releases had and the installed one lacks, mapped to today's API.

CPMpy 0.9.x exported `IntVar`, `BoolVar` and `cparray` as deprecated aliases of `intvar`, `boolvar` and
`cpm_array` (deprecated since 0.9.0), and earlier 0.9 releases `alldifferent`, `allequal` and `circuit` as
aliases of `AllDifferent`, `AllEqual` and `Circuit`; later releases dropped them (the installed 1.1.1 has
none). Programs written against those releases are valid CPMpy; the grader runs them with the aliases
restored, and says so, instead of refusing them.
"""

from __future__ import annotations

import ast
import warnings

from triforge.core import pyparse

LEGACY = {"IntVar": "intvar", "BoolVar": "boolvar", "cparray": "cpm_array",
          "alldifferent": "AllDifferent", "allequal": "AllEqual", "circuit": "Circuit"}
_ALIAS = "_triforge_cpmpy_legacy"


def _uses(tree: ast.Module) -> tuple[set[str], bool]:
    """Legacy names the program reaches through the cpmpy module or imports from it; and whether it
    star-imports cpmpy and uses one of them bare."""
    modules = {"cpmpy"}
    star = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "cpmpy"}
        elif isinstance(node, ast.ImportFrom) and node.module == "cpmpy" and any(a.name == "*" for a in node.names):
            star = True
    used: set[str] = set()
    bare: set[str] = set()
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in LEGACY and isinstance(node.value, ast.Name)
                and node.value.id in modules):
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module == "cpmpy":
            used |= {a.name for a in node.names if a.name in LEGACY}
        elif isinstance(node, ast.Name) and node.id in LEGACY and node.id not in defined:
            if isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            else:
                bare.add(node.id)
    bare -= defined
    return used | (bare if star else set()), star and bool(bare)


def with_legacy_names(source: str) -> tuple[str, list[str]]:
    """The program with the legacy CPMpy names it uses restored (one line inserted after any `__future__`
    imports), and a note per name; the program unchanged where it uses none."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = pyparse.parse(source)
    except SyntaxError:
        return source, []
    used, bare = _uses(tree)
    if not used:
        return source, []
    names = sorted(used)
    parts = [f"import cpmpy as {_ALIAS}"]
    parts += [f"{_ALIAS}.{n} = getattr({_ALIAS}, {n!r}, None) or {_ALIAS}.{LEGACY[n]}" for n in names]
    if bare:
        parts += [f"{n} = {_ALIAS}.{n}" for n in names]
    line = "; ".join(parts) + "\n"
    after = 0
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            after = stmt.end_lineno or stmt.lineno
        elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            break
    lines = source.splitlines(keepends=True)
    if after and lines and not lines[after - 1].endswith("\n"):
        lines[after - 1] += "\n"
    out = "".join(lines[:after]) + line + "".join(lines[after:])
    notes = [f"cpmpy.{n} read as cpmpy.{LEGACY[n]}: an alias older CPMpy releases had (0.9.x; the installed "
             f"CPMpy has no {n})" for n in names]
    return out, notes
