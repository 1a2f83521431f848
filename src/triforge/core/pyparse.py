"""`ast.parse`, one thread at a time.

CPython 3.11 keeps the AST constructor's recursion depth in state shared by every thread; two threads parsing
at once can fail with `SystemError: AST constructor recursion depth mismatch` (python/cpython#106905). triforge
parses programs from worker threads (grading a bench, the reference runner), so every parse goes through here.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **kwargs: object) -> Any:
    with _LOCK:
        return ast.parse(source, filename, mode, **kwargs)  # type: ignore[call-overload]
