"""How to run `triforge` from here, so that every command a hint prints runs as printed.

After `bash scripts/main.sh` the command lives in `.venv/bin`, which is not on PATH until the venv is
activated: a hint then says `.venv/bin/triforge ...` (or the absolute path when that folder is not below
the current one) instead of a bare `triforge ...` that the shell cannot find.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

_HINT = re.compile(r"`triforge (?=[a-z-])")  # a command in backticks, as every hint writes one


def program() -> str:
    """`triforge` when that name finds this installation on PATH; else the path of its console script."""
    script = Path(sys.executable).parent / "triforge"  # beside this interpreter, unresolved (venv symlinks)
    if not script.is_file():
        return "triforge"
    on_path = shutil.which("triforge")
    if on_path and os.path.realpath(on_path) == os.path.realpath(script):
        return "triforge"
    try:
        rel = script.absolute().relative_to(Path.cwd())
    except ValueError:
        return str(script.absolute())
    return f"./{rel}" if len(rel.parts) == 1 else str(rel)


def runnable(text: str) -> str:
    """`text` with each command it suggests (`triforge SUBCOMMAND ...`, in backticks) spelled so that it runs
    from here."""
    prog = program()
    return text if prog == "triforge" else _HINT.sub(f"`{prog} ", text)
