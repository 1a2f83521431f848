"""How a reference prints: matching what it printed on probe assignments against the values of its variables and
expressions (the reading half of ref_jobs_probe.py; no triforge import, run in the harness's subprocess)."""

from __future__ import annotations

import contextlib
import json
import random
from fractions import Fraction
from typing import Any


def plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def num(v: Any) -> Fraction | None:
    v = plain(v)
    if isinstance(v, bool):
        return Fraction(int(v))
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, float) and v == v and abs(v) != float("inf"):
        return Fraction(v)
    return None


def leaves(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in leaves(v, (*path, i))]
    return [(path, value)]


def parse_printed(stdout: str) -> dict[str, Any] | None:
    text = stdout.strip()
    for cand in (text, *reversed(text.splitlines())):
        with contextlib.suppress(ValueError):
            obj = json.loads(cand)
            if isinstance(obj, dict):
                return obj
    return None


def canon(vec: list[Fraction]) -> tuple[tuple[Fraction, ...], Fraction, Fraction] | None:
    """`vec` up to an affine map: (shape, first value, first non-zero step); None when constant."""
    d = next((x - vec[0] for x in vec if x != vec[0]), None)
    if d is None:
        return None
    return tuple((x - vec[0]) / d for x in vec), vec[0], d


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def value_at(value: Any, path: tuple) -> Any:
    for p in path:
        try:
            value = value[p]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def lists_in(value: Any, path: tuple = ()) -> list[tuple[tuple, list]]:
    """Every list in a printed value, with its path."""
    out: list[tuple[tuple, list]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out += lists_in(v, (*path, k))
    elif isinstance(value, list):
        out.append((path, value))
        for i, v in enumerate(value):
            out += lists_in(v, (*path, i))
    return out


def varying_lists(outputs: list[dict[str, Any]]) -> list[tuple]:
    """Paths of the lists whose length is not the same on every probe (or that some probe lacks)."""
    seen: dict[tuple, set[int]] = {}
    for o in outputs:
        for path, lst in lists_in(o):
            seen.setdefault(path, set()).add(len(lst))
    return [p for p, lengths in seen.items()
            if len(lengths) > 1 or sum(isinstance(value_at(o, p), list) for o in outputs) < len(outputs)]


def structures(outputs: list[dict[str, Any]]) -> dict[str, frozenset]:
    """For each key whose layout is the same on every probe: the paths of its leaves."""
    out: dict[str, frozenset] = {}
    for key in outputs[0]:
        shapes = {frozenset(p for p, _ in leaves(o.get(key), (key,))) for o in outputs if key in o}
        if len(shapes) == 1 and all(key in o for o in outputs):
            out[key] = shapes.pop()
    return out


def index_lists(variables: list[Any], arrays: list[list[Any]], probes: list[list[Any]],
                 outputs: list[dict[str, Any]], plan: dict[tuple, tuple]) -> dict[tuple, tuple]:
    """Lists of integers that are the positions (from 0 or 1) where one of the program's arrays is true, on
    every probe: path -> ("idx", array, first position)."""
    wanted = []
    for path, first in lists_in(outputs[0]):
        got = [value_at(o, path) for o in outputs]
        if not all(isinstance(g, list) and all(is_int(x) for x in g) for g in got):
            continue
        if len({len(g) for g in got}) == 1 and all((*path, i) in plan for i in range(len(first))):
            continue  # fixed length, every position read already
        wanted.append((path, tuple(tuple(g) for g in got)))
    if not wanted or not arrays:
        return {}
    rows: list[list[tuple[int, ...] | None]] = [[] for _ in arrays]
    for p in probes:
        _assign(variables, p)
        for row, arr in zip(rows, arrays, strict=True):
            try:
                row.append(tuple(i for i, e in enumerate(arr) if e.value()))
            except Exception:  # noqa: BLE001 - undefined on this assignment
                row.append(None)
    _assign(variables, None)
    signature: dict[tuple, int] = {}
    for j, row in enumerate(rows):
        if all(r is not None for r in row):
            signature.setdefault(tuple(row), j)
    found: dict[tuple, tuple] = {}
    for path, got in wanted:
        for c in (0, 1):
            j = signature.get(tuple(tuple(x - c for x in g) for g in got))
            if j is not None and len({g for g in got}) > 1:
                found[path] = ("idx", arrays[j], c)
                break
    return found


def sequences(val: Any, expression: type) -> list[list[Any]]:
    """`val` as one-dimensional sequences of expressions: itself, or its rows and its flattening."""
    try:
        if is_array(val) and val.ndim > 2:
            return []
        rows = [list(r) for r in val] if (is_array(val) and val.ndim == 2) or (
            isinstance(val, (list, tuple)) and val and all(isinstance(r, (list, tuple)) for r in val)) else []
        seqs = [r for r in rows if r and all(isinstance(x, expression) for x in r)]
        flat = list(flatten(val))
        if flat and all(isinstance(x, expression) for x in flat):
            seqs.append(flat)
        return seqs
    except Exception:  # noqa: BLE001 - an odd container is not a candidate
        return []


def pick(hits: list[int], columns: list[tuple[Any, bool, list[Fraction]]]) -> int | None:
    """The one variable among `hits`, else the first expression; None when none, or when two variables are
    alike on every probe (which one the program prints cannot be told)."""
    variables = [i for i in hits if columns[i][1]]
    if len(variables) > 1:
        return None
    return variables[0] if variables else (hits[0] if hits else None)


def flatten(val: Any) -> Any:
    for x in (val.flat if hasattr(val, "flat") else val):
        if isinstance(x, (list, tuple)) or is_array(x):
            yield from flatten(x)
        else:
            yield x


def is_array(val: Any) -> bool:
    ndim = getattr(val, "ndim", 0)
    return isinstance(ndim, int) and ndim > 0 and hasattr(val, "flat")


def random_value(v: Any, rng: random.Random) -> Any:
    if v.is_bool():
        return rng.random() < 0.5
    lb, ub = v.get_bounds()
    return rng.randint(int(lb), int(ub))


def same(a: Any, b: Any) -> bool:
    """Equal as printed values: numbers by value (a boolean equals 0/1), lists and objects leaf by leaf."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    na, nb = num(a), num(b)
    if na is not None and nb is not None:
        return na == nb
    return a == b and type(a) is type(b)


def path_name(path: tuple) -> str:
    return str(path[0]) + "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in path[1:])


def _assign(variables: list[Any], values: list[Any] | None) -> None:
    for i, v in enumerate(variables):
        v._value = None if values is None else values[i]


def read_leaves(variables: list[Any], exprs: list[tuple[str, Any]], probes: list[list[Any]],
          outputs: list[dict[str, Any]]) -> dict[tuple, tuple]:
    """Leaf path -> ("const", value) | ("lin", expression, a, b) for the leaves that can be read."""
    columns: list[tuple[Any, bool, list[Fraction]]] = []  # (expression, is a variable, values per probe)
    for j, v in enumerate(variables):
        columns.append((v, True, [Fraction(int(p[j])) for p in probes]))
    vecs: list[list[Fraction | None]] = [[] for _ in exprs]
    for p in probes:  # each probe's values set once, then every expression read under them
        _assign(variables, p)
        for vec, (_, e) in zip(vecs, exprs, strict=True):
            try:
                vec.append(num(e.value()))
            except Exception:  # noqa: BLE001 - an expression undefined on a random assignment
                vec.append(None)
    _assign(variables, None)
    columns += [(e, False, vec) for vec, (_, e) in zip(vecs, exprs, strict=True)
                if all(n is not None for n in vec)]  # type: ignore[misc]
    exact: dict[tuple, list[int]] = {}
    affine: dict[tuple, list[int]] = {}
    for i, (_, _, vec) in enumerate(columns):
        exact.setdefault(tuple(vec), []).append(i)
        if (c := canon(vec)) is not None:
            affine.setdefault(c[0], []).append(i)
    leaf_sets = [dict(leaves(o)) for o in outputs]
    varying = varying_lists(outputs)
    plan: dict[tuple, tuple] = {}
    for path, first in leaf_sets[0].items():
        if not all(path in ls for ls in leaf_sets) or any(path[: len(v)] == v for v in varying):
            continue  # a position in a list whose length changes says nothing fixed
        raw = [ls[path] for ls in leaf_sets]
        nums = [num(x) for x in raw]
        if all(x == raw[0] and type(x) is type(raw[0]) for x in raw):
            plan[path] = ("const", first)
            continue
        if any(n is None for n in nums):
            continue
        if (best := pick(exact.get(tuple(nums), []), columns)) is not None:  # type: ignore[arg-type]
            plan[path] = ("lin", columns[best][0], Fraction(1), Fraction(0))
            continue
        c = canon(nums)  # type: ignore[arg-type]
        if c is None or (best := pick(affine.get(c[0], []), columns)) is None:
            continue
        cvec = columns[best][2]
        cc = canon(cvec)
        a = c[2] / cc[2]  # type: ignore[index]
        plan[path] = ("lin", columns[best][0], a, c[1] - a * cc[1])  # type: ignore[index]
    return plan


def fixing(plan: dict[tuple, tuple], structure: dict[str, frozenset], values: dict[str, Any]
           ) -> tuple[list[Any], set[int], set[str]] | str:
    """Constraints that make the program print `values`, the ids of the variables they pin, and the keys with a
    leaf no reading covers; or why the program can never print them."""
    from cpmpy.transformations.get_variables import get_variables

    fix: list[Any] = []
    pinned: set[int] = set()
    unread: set[str] = set()
    for key, value in values.items():
        shape = structure.get(key)
        if shape is not None and {p for p, _ in leaves(value, (key,))} != shape:
            return f"key {key!r}: the program always prints {len(shape)} value(s) here, laid out differently"
    lists = {p: e for p, e in plan.items() if e[0] == "idx"}
    for path, (_, elems, c) in lists.items():
        got = value_at(values, path)
        ints = [int(x) for x in got] if isinstance(got, list) and all(is_int(x) for x in got) else None
        if ints is None or ints != sorted(set(ints)) or any(not c <= x < c + len(elems) for x in ints):
            return (f"key {path_name(path)!r}: {json.dumps(got)[:80]} is not a list of increasing positions "
                    f"{c}..{c + len(elems) - 1} (the program prints the positions where an array is true)")
        chosen = set(ints)
        for i, e in enumerate(elems):
            fix.append((e if e.is_bool() else e != 0) == ((i + c) in chosen))
            pinned.update(id(v) for v in get_variables(e))
    for path, leaf in leaves(values):
        if any(path[: len(p)] == p for p in lists):
            continue
        entry = plan.get(path)
        if entry is None:
            unread.add(str(path[0]))
            continue
        if entry[0] == "const":
            if not same(leaf, entry[1]):
                return f"key {path_name(path)!r}: {leaf!r} where the program always prints {entry[1]!r}"
            continue
        _, e, a, b = entry
        n = num(leaf)
        target = None if n is None else (n - b) / a
        if target is None or target.denominator != 1:
            return f"key {path_name(path)!r}: the program cannot print {leaf!r} there"
        lb, ub = e.get_bounds()
        if not lb <= int(target) <= ub:
            return f"key {path_name(path)!r}: value {leaf!r} outside the model's range"
        fix.append(e == int(target))
        pinned.update(id(v) for v in get_variables(e))
    return fix, pinned, unread
