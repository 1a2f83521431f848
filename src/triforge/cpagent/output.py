"""Strict reading of a solution printed by a program: one JSON object, exact keys, exact types and shapes."""

from __future__ import annotations

import json
from typing import Any


class OutputError(ValueError):
    """The printed output is not an acceptable solution; the message says why."""


def _no_constant(name: str) -> Any:
    raise OutputError(f"non-standard JSON constant {name}")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise OutputError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)


def _count_objects(text: str) -> int:
    """How many top-level JSON objects can be decoded somewhere in `text` (for the error message)."""
    dec = json.JSONDecoder()
    n = i = 0
    while (i := text.find("{", i)) >= 0:
        try:
            obj, end = dec.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        n += isinstance(obj, dict)
        i = end
    return n


def parse_solution(stdout: str) -> dict[str, Any]:
    """The one JSON object that makes up the whole output (surrounding whitespace allowed).

    Raises OutputError for empty output, prose around the object, several objects, non-objects,
    NaN/Infinity or duplicate keys.
    """
    text = stdout.strip()
    if not text:
        raise OutputError("no output")
    try:
        obj = _loads(text)
    except OutputError:
        raise
    except ValueError:
        n = _count_objects(text)
        if n == 0:
            raise OutputError("no JSON object in the output") from None
        if n > 1:
            raise OutputError(f"{n} JSON objects in the output; exactly one is allowed") from None
        raise OutputError("the JSON object is wrapped in other output; print only the object") from None
    if not isinstance(obj, dict):
        raise OutputError(f"the output is a JSON {type(obj).__name__}, not an object")
    return obj


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "object"
    return "null" if v is None else type(v).__name__


def shape_errors(value: Any, template: Any, path: str, exact_lengths: bool = True) -> list[str]:
    """Differences in type and shape between `value` and the reference's `template` (first few only).

    Without `exact_lengths` a list may have another length than the template's (its items are then compared
    with the template's first item): for outputs whose length depends on the solution."""
    tk, vk = _kind(template), _kind(value)
    if tk == "number" and vk == "integer":
        return []
    if tk != vk:
        got = "null" if value is None else f"{vk} {json.dumps(value)[:40]}"
        return [f"{path}: expected {tk}, got {got}"]
    if tk == "list":
        if len(value) != len(template):
            if exact_lengths:
                return [f"{path}: expected a list of length {len(template)}, got length {len(value)}"]
            template = [template[0]] * len(value) if template else value
        errs: list[str] = []
        for i, (v, t) in enumerate(zip(value, template, strict=True)):
            errs += shape_errors(v, t, f"{path}[{i}]", exact_lengths)
            if len(errs) >= 3:
                break
        return errs
    if tk == "object":
        if set(value) != set(template):
            return [f"{path}: expected keys {sorted(template)}, got {sorted(value)}"]
        return [e for k in template for e in shape_errors(value[k], template[k], f"{path}.{k}", exact_lengths)][:3]
    return []


def key_errors(solution: dict[str, Any], required: tuple[str, ...] | list[str]) -> list[str]:
    missing = [k for k in required if k not in solution]
    extra = [k for k in solution if k not in required]
    errs = []
    if missing:
        errs.append(f"missing key(s): {', '.join(missing)}")
    if extra:
        errs.append(f"unexpected key(s): {', '.join(extra)}")
    return errs


def as_template_bools(value: Any, template: Any) -> Any:
    """`value` with 0/1 integers and booleans converted to the template's kind, leaf by leaf (for keys
    whose problem text allows either); other values are left for `shape_errors` to judge."""
    if isinstance(template, list) and isinstance(value, list):
        if len(template) != len(value):
            return value
        return [as_template_bools(v, t) for v, t in zip(value, template, strict=True)]
    if isinstance(template, bool) and type(value) is int and value in (0, 1):
        return bool(value)
    if type(template) is int and isinstance(value, bool):
        return int(value)
    return value


def ints_as_bools(value: Any, template: Any) -> Any:
    """`value` with each integer 0/1 read as a boolean where the template (what the reference prints) has a
    boolean, leaf by leaf; strings, floats and other integers are left for `shape_errors` to refuse."""
    if isinstance(template, list) and isinstance(value, list):
        if len(template) != len(value):
            return value
        return [ints_as_bools(v, t) for v, t in zip(value, template, strict=True)]
    if isinstance(template, dict) and isinstance(value, dict):
        return {k: ints_as_bools(v, template[k]) if k in template else v for k, v in value.items()}
    if isinstance(template, bool) and type(value) is int and value in (0, 1):
        return bool(value)
    return value
