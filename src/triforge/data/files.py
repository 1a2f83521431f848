"""Reading data files that may be gzip-compressed: the bundled sets ship `.jsonl.gz`, users' copies are plain."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TextIO


def open_text(path: str | Path) -> TextIO:
    """The file as UTF-8 text, decompressed on the fly when its name ends in `.gz`."""
    p = Path(path)
    if p.suffix == ".gz":
        return gzip.open(p, "rt", encoding="utf-8")
    return p.open(encoding="utf-8")


def read_text(path: str | Path) -> str:
    with open_text(path) as fh:
        return fh.read()


def find_file(folder: Path, name: str) -> Path | None:
    """`folder/name`, else `folder/name.gz`, else None."""
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None
