"""Where the local model lives: `$TRIFORGE_HOME` (default `~/.cache/triforge`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def triforge_home() -> Path:
    """The per-user cache root: `$TRIFORGE_HOME`, else `$XDG_CACHE_HOME/triforge`, else `~/.cache/triforge`."""
    explicit = os.environ.get("TRIFORGE_HOME")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "triforge"


def models_dir() -> Path:
    return triforge_home() / "models"


def local_dir() -> Path:
    """State of the local server: the `local serve` state file, logs, and the chosen model."""
    return triforge_home() / "local"


def choice_file() -> Path:
    """Records the GGUF chosen with `triforge local install --model-path`."""
    return local_dir() / "model.json"


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically (temp file + rename), so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)
