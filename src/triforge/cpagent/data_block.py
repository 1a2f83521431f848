"""Putting an instance into a program that has no well-formed `# Data` ... `# End of data` block.

A program owes the grader no marker. Where the markers are missing or malformed (no end line, other text on
the marker lines), the instance's names are found by reading the program: the first plain assignment of each
name (in the module body first, then in the bodies of top-level `if`/`with`/`try` blocks and functions), or,
for a name the program never assigns, an entry of that name in a dict literal of literal values (data read
from a dict), else a literal default of a parameter of that name (`def main(n=13)`); `n = Data.n` reads the
class attribute. Where every name is found and its value equals the instance's, the program runs unchanged.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from typing import Any

from triforge.core import pyparse


@dataclass(frozen=True)
class Site:
    """Where the program gives one of the instance's names its value."""

    name: str
    start: int  # character span to rewrite
    end: int
    line: int
    value: ast.expr | None  # the program's value, when it can be read as a literal
    statement: bool  # True: a whole assignment statement; False: a dict entry's value
    binds: tuple[str, ...] = ()  # every name the statement binds


def _parse(source: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pyparse.parse(source)
    except SyntaxError:
        return None


def _offsets(source: str) -> list[int]:
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _pos(source: str, starts: list[int], line: int, col_bytes: int) -> int:
    """Character offset of (1-based line, UTF-8 byte column), as the ast gives them."""
    text = source[starts[line - 1]: starts[line] if line < len(starts) else len(source)]
    return starts[line - 1] + len(text.encode("utf-8")[:col_bytes].decode("utf-8", errors="ignore"))


def _span(source: str, starts: list[int], node: ast.AST) -> tuple[int, int]:
    return (_pos(source, starts, node.lineno, node.col_offset),  # type: ignore[attr-defined]
            _pos(source, starts, node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]


def assignment(stmt: ast.stmt) -> tuple[list[str], ast.expr | None] | None:
    """Names a plain assignment binds and its value (`a = 1`, `a: int = 1`, `a, b = 1, 2`); None otherwise."""
    if isinstance(stmt, ast.Assign):
        targets, value = stmt.targets, stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        targets, value = [stmt.target], stmt.value
    else:
        return None
    names: list[str] = []
    for t in targets:
        elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
        if not all(isinstance(e, ast.Name) for e in elts):
            return None
        names += [e.id for e in elts]  # type: ignore[attr-defined]
    return names, value


def _bodies(tree: ast.Module) -> list[list[ast.stmt]]:
    """Statement lists searched in order: the module, then top-level blocks and functions (one level down)."""
    out: list[list[ast.stmt]] = [tree.body]
    nested: list[list[ast.stmt]] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.If, ast.With, ast.Try)):
            out.append(stmt.body)
            for inner in stmt.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    nested.append(inner.body)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(stmt.body)
    return out + nested


def _element_value(value: ast.expr, i: int) -> ast.expr | None:
    if isinstance(value, (ast.Tuple, ast.List)) and i < len(value.elts):
        return value.elts[i]
    return None


def _literal_dicts(tree: ast.Module) -> list[ast.Dict]:
    """Dict literals of constant string keys and literal values, anywhere in the program, in source order."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and node.keys and all(
                isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            try:
                for v in node.values:
                    ast.literal_eval(v)
            except ValueError:
                continue
            found.append(node)
    return sorted(found, key=lambda d: (d.lineno, d.col_offset))


def _dict_entry(dicts: list[ast.Dict], name: str, owner: str | None = None,
                named: dict[str, ast.Dict] | None = None) -> ast.expr | None:
    if owner is not None:
        d = (named or {}).get(owner)
        candidates = [d] if d is not None else []
    else:
        candidates = dicts
    for d in candidates:
        for k, v in zip(d.keys, d.values, strict=True):
            if isinstance(k, ast.Constant) and k.value == name:
                return v
    return None


def find_sites(source: str, names: list[str]) -> tuple[dict[str, Site], list[str]]:
    """Where the program gives each name its value; and the names it never gives one (or [] and all names
    when the program cannot be parsed)."""
    tree = _parse(source)
    if tree is None:
        return {}, list(names)
    starts = _offsets(source)
    dicts = _literal_dicts(tree)
    named = {}  # `data = {...}` at any level: the dict literal bound to a name
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and node.value in dicts:
            for t in node.targets:
                if isinstance(t, ast.Name):
                    named.setdefault(t.id, node.value)
    classes = _class_literals(tree)
    sites: dict[str, Site] = {}
    for body in _bodies(tree):
        for stmt in body:
            got = assignment(stmt)
            if got is None:
                continue
            bound, value = got
            for i, n in enumerate(bound):
                if n not in names or n in sites:
                    continue
                v = value if len(bound) == 1 else _element_value(value, i) if value is not None else None
                entry = None
                if (isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name)
                        and isinstance(v.slice, ast.Constant) and isinstance(v.slice.value, str)):
                    entry = _dict_entry(dicts, v.slice.value, v.value.id, named)
                if (entry is None and isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name)
                        and v.value.id in classes):
                    entry = classes[v.value.id].get(v.attr)  # `n = Data.n`: the class body holds the value
                if entry is None and v is not None and not _is_literal(v):
                    entry = _dict_entry(dicts, n)  # `n = d["n"]` of a dict passed in: a literal entry named n
                if entry is not None:  # `n = data["n"]`: the dict literal is where the value lives
                    a, b = _span(source, starts, entry)
                    sites[n] = Site(n, a, b, entry.lineno, entry, statement=False)
                else:
                    a, b = _span(source, starts, stmt)
                    sites[n] = Site(n, a, b, stmt.lineno, v, statement=True, binds=tuple(bound))
    for n in names:
        if n not in sites and (entry := _dict_entry(dicts, n)) is not None:
            a, b = _span(source, starts, entry)
            sites[n] = Site(n, a, b, entry.lineno, entry, statement=False)
    for n, default in _parameter_defaults(tree).items():  # `def main(n=8): ...` called as `main()`
        if n in names and n not in sites:
            a, b = _span(source, starts, default)
            sites[n] = Site(n, a, b, default.lineno, default, statement=False)
    return sites, [n for n in names if n not in sites]


def _class_literals(tree: ast.Module) -> dict[str, dict[str, ast.expr]]:
    """Literal class attributes of the program's top-level classes: {class: {attribute: value}}."""
    out: dict[str, dict[str, ast.expr]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            attrs: dict[str, ast.expr] = {}
            for inner in stmt.body:
                got = assignment(inner)
                if got is not None and len(got[0]) == 1 and _is_literal(got[1]):
                    attrs.setdefault(got[0][0], got[1])
            out[stmt.name] = attrs
    return out


def _parameter_defaults(tree: ast.Module) -> dict[str, ast.expr]:
    """The first literal default (None aside) of each parameter name, over the program's functions in source
    order: where a program keeps its data when it never assigns it."""
    out: dict[str, ast.expr] = {}
    funcs = sorted((f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))),
                   key=lambda f: (f.lineno, f.col_offset))
    for f in funcs:
        positional = [*f.args.posonlyargs, *f.args.args]
        pairs = list(zip(positional[len(positional) - len(f.args.defaults):], f.args.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(f.args.kwonlyargs, f.args.kw_defaults, strict=True) if d is not None]
        for arg, default in pairs:
            if (arg.arg not in out and _is_literal(default)
                    and not (isinstance(default, ast.Constant) and default.value is None)):
                out[arg.arg] = default
    return out


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return False
    return True


def _norm(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def program_value(site: Site) -> tuple[bool, Any]:
    """(True, value) when the site's value is a literal; (False, None) otherwise."""
    if site.value is None:
        return False, None
    try:
        return True, ast.literal_eval(site.value)
    except (ValueError, SyntaxError, TypeError):
        return False, None


def put_instance(source: str, instance: dict[str, Any]) -> tuple[str, list[Site], list[str]]:
    """The program with the instance's values given where it gives its own; the sites changed and the names
    not found. A site whose literal value already equals the instance's is left as written."""
    sites, missing = find_sites(source, list(instance))
    changed = []
    for name, site in sites.items():
        known, value = program_value(site)
        if not (known and _norm(value) == _norm(instance[name])):
            changed.append(site)
    edits: dict[tuple[int, int], str] = {}
    for site in changed:
        key = (site.start, site.end)
        if not site.statement:
            edits[key] = repr(instance[site.name])
            continue
        base = edits.get(key, source[site.start: site.end])
        mine = [n for n in site.binds if n in instance]
        if set(site.binds) <= set(instance) and base == source[site.start: site.end]:
            # The whole statement is the instance's: one line, as a well-formed block would hold it.
            edits[key] = "; ".join(f"{n} = {instance[n]!r}" for n in dict.fromkeys(mine))
        elif set(site.binds) <= set(instance):
            continue  # already rewritten whole for another of its names
        else:
            edits[key] = f"{base}; {site.name} = {instance[site.name]!r}"
    out = source
    for (a, b), text in sorted(edits.items(), reverse=True):
        out = out[:a] + text + out[b:]
    return out, changed, missing
