"""Planted wrong submissions built from a reference solution (test helper)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

Solution = dict[str, Any]


def _leaves(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, (*path, i))]
    return [(path, value)]


def _set(sol: Solution, key: str, path: tuple, new: Any) -> None:
    if not path:
        sol[key] = new
        return
    target = sol[key]
    for i in path[:-1]:
        target = target[i]
    target[path[-1]] = new


def _map_ints(value: Any, f: Callable[[int], int]) -> Any:
    if isinstance(value, list):
        return [_map_ints(v, f) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return f(value)
    return value


def _map_bools(value: Any) -> Any:
    if isinstance(value, list):
        return [_map_bools(v) for v in value]
    return int(value) if isinstance(value, bool) else value


def _first_leaf(sol: Solution, want: Callable[[Any], bool]) -> tuple[str, tuple, Any] | None:
    for key, value in sol.items():
        for path, leaf in _leaves(value):
            if want(leaf):
                return key, path, leaf
    return None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def text_faults(sol: Solution) -> dict[str, str]:
    """Faults in the printed text: rejected before any solving."""
    body = json.dumps(sol)
    return {
        "empty_object": "{}",
        "prose_around": f"Here is the solution:\n{body}\nDone.",
        "prose_same_line": f"solution = {body}",
        "two_objects": f"{body}\n{body}",
        "not_json": body.replace('"', "'"),
        "nan_value": json.dumps({k: float("nan") for k in sol}, allow_nan=True),
    }


def shape_faults(sol: Solution) -> dict[str, Solution]:
    """Faults in keys, types and shapes: rejected by the static checks."""
    keys = list(sol)
    out: dict[str, Solution] = {
        "missing_key": {k: sol[k] for k in keys[:-1]},
        "extra_key": {**sol, "extra": 0},
        "renamed_key": {**{k: sol[k] for k in keys[:-1]}, keys[-1].upper() + "_": sol[keys[-1]]},
    }
    if (hit := _first_leaf(sol, _is_int)) is not None:
        key, path, leaf = hit
        for name, new in (("int_as_string", str(leaf)), ("int_as_float", float(leaf)), ("int_as_bool", bool(leaf))):
            bad = copy.deepcopy(sol)
            _set(bad, key, path, new)
            out[name] = bad
    if (hit := _first_leaf(sol, lambda v: isinstance(v, bool))) is not None:
        key, path, leaf = hit
        bad = copy.deepcopy(sol)
        _set(bad, key, path, int(leaf))
        out["bool_as_int"] = bad
    if (hit := next(((k, v) for k, v in sol.items() if isinstance(v, list) and v), None)) is not None:
        key, value = hit
        out["list_too_short"] = {**sol, key: value[:-1]}
        out["list_too_long"] = {**sol, key: value + value[:1]}
    return out


def value_faults(sol: Solution) -> dict[str, Solution]:
    """Faults in the values: the right shape, found wrong only by solving."""
    out: dict[str, Solution] = {}
    if _first_leaf(sol, _is_int) is not None:
        out["shift_plus_one"] = {k: _map_ints(v, lambda x: x + 1) for k, v in sol.items()}
        out["shift_minus_one"] = {k: _map_ints(v, lambda x: x - 1) for k, v in sol.items()}
        key, path, leaf = _first_leaf(sol, _is_int)  # type: ignore[misc]
        bad = copy.deepcopy(sol)
        _set(bad, key, path, leaf + 1)
        out["perturb_one"] = bad
    elif (hit := _first_leaf(sol, lambda v: isinstance(v, bool))) is not None:
        key, path, leaf = hit
        bad = copy.deepcopy(sol)
        _set(bad, key, path, not leaf)
        out["perturb_one"] = bad
        # The same wrong value with every boolean printed as 0/1: read as booleans, still wrong.
        out["perturb_one_01"] = {k: _map_bools(v) for k, v in bad.items()}
        out["shift_rows"] = {k: (v[1:] + v[:1] if isinstance(v, list) else v) for k, v in sol.items()}
    return out
