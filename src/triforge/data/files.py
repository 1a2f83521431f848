"""Reading data files that may be gzip-compressed: the bundled sets ship `.jsonl.gz`, users' copies are plain."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TextIO

from triforge.core.errors import UserError


def open_text(path: str | Path) -> TextIO:
    """The file as UTF-8 text, decompressed on the fly when its name ends in `.gz`."""
    p = Path(path)
    if p.suffix == ".gz":
        return gzip.open(p, "rt", encoding="utf-8")
    return p.open(encoding="utf-8")


def read_text(path: str | Path) -> str:
    """The whole file as text; `UserError` (one line) where it is not UTF-8 text or not the gzip it says."""
    try:
        with open_text(path) as fh:
            return fh.read()
    except UnicodeDecodeError as e:
        raise UserError(f"{path} is not UTF-8 text (byte {e.start} cannot be read): give a JSON lines file") from None
    except (gzip.BadGzipFile, EOFError) as e:
        raise UserError(f"{path} is not a readable gzip file ({e})") from None


def find_file(folder: Path, name: str) -> Path | None:
    """`folder/name`, else `folder/name.gz`, else None."""
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None
