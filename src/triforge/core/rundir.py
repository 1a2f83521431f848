"""A run directory: resolved config, trace.jsonl, results.json, report.md (and trace.html on request)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    tmp.replace(path)


def make_run_dir(path: str | Path) -> Path:
    """`path` as a folder (made if missing), or one line saying why it cannot be (a file there, no permission)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = "a file of that name is in the way" if p.is_file() else e.strerror
        raise UserError(f"cannot create run directory {p}: {why}") from None
    return p


class RunDir:
    def __init__(self, path: str | Path) -> None:
        self.path = make_run_dir(path)

    @property
    def results_path(self) -> Path:
        return self.path / "results.json"

    def write_config(self, config: dict[str, Any]) -> None:
        cfg = {**config, "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_json_atomic(self.path / "config.json", cfg)

    def load_results(self) -> dict[str, Any]:
        """Results so far (for resume); a missing or torn file is an empty result set."""
        try:
            return json.loads(self.results_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def write_results(self, results: dict[str, Any]) -> None:
        write_json_atomic(self.results_path, results)

    def write_report(self, markdown: str) -> None:
        (self.path / "report.md").write_text(markdown, encoding="utf-8")
