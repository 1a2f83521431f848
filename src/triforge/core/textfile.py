"""Text files a user hands in (a problem statement, a kernel, a program): read whole, or one line saying why not."""

from __future__ import annotations

from pathlib import Path

from triforge.core.errors import UserError


def read_user_text(path: str | Path, what: str, hint: str = "") -> str:
    """The UTF-8 text of `path`; `UserError` naming `what` when it is missing, a folder, or not text."""
    p = Path(path)
    tail = f": {hint}" if hint else ""
    if p.is_dir():
        raise UserError(f"{what} {p} is a folder, not a file{tail}")
    if not p.is_file():
        raise UserError(f"{what} {p} not found{tail}")
    data = p.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {p} is not UTF-8 text (byte {e.start} cannot be read){tail}") from None
    if "\x00" in text:
        raise UserError(f"{what} {p} is not text (it holds NUL bytes){tail}")
    return text
