"""A small TOML writer for program files (the standard library only reads TOML).

Writes top-level tables and arrays of tables; anything deeper is an inline table or array.
TOML has no null, so `None` values are left out (every optional program field defaults to None).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else _string(k)


def _string(s: str) -> str:
    # JSON string escapes are valid TOML basic-string escapes; DEL must be escaped in TOML too.
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items() if x is not None) + "}"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _is_table_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def dumps(data: dict[str, Any]) -> str:
    lines: list[str] = []
    later: list[tuple[str, Any]] = []
    for k, v in data.items():
        if v is None:
            continue
        if isinstance(v, dict) or _is_table_list(v):
            later.append((k, v))
        else:
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in later:
        rows = v if isinstance(v, list) else [v]
        header = f"[[{_key(k)}]]" if isinstance(v, list) else f"[{_key(k)}]"
        for row in rows:
            lines += ["", header]
            lines += [f"{_key(rk)} = {_value(rv)}" for rk, rv in row.items() if rv is not None]
    return "\n".join(lines) + "\n"
