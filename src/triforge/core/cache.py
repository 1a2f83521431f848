"""SQLite response cache keyed on the canonical request plus a sample index."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from enum import StrEnum
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError


class CacheMode(StrEnum):
    OFF = "off"
    READ_WRITE = "rw"
    REPLAY = "replay"


class CacheMiss(UserError):
    """A request not found in the cache in replay mode."""


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def wire_request(body: dict[str, Any], *, base_url: str | None, extra_body: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """What the endpoint receives, as a cache key: the body with `extra_body` merged in (as the client sends
    it), and where it goes. Anything that can change the reply belongs here."""
    return {**body, **(extra_body or {}), "base_url": base_url}


def request_key(request: dict[str, Any], sample: int = 0) -> str:
    """Key of one request: every field that changes the reply, plus the sample index."""
    body = {k: v for k, v in request.items() if v is not None}
    return hashlib.sha256(f"{canonical(body)}\x00{int(sample)}".encode()).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path, mode: CacheMode | str = CacheMode.READ_WRITE) -> None:
        self.mode = CacheMode(mode)
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if self.mode is not CacheMode.OFF:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, request TEXT, response TEXT)"
            )

    def get(self, request: dict[str, Any], sample: int = 0) -> dict[str, Any] | None:
        if self._db is None:
            return None
        key = request_key(request, sample)
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key=?", (key,)).fetchone()
        if row is None:
            if self.mode is CacheMode.REPLAY:
                raise CacheMiss(
                    f"replay cache {self.path} has no response for this request (model "
                    f"{request.get('model')!r}, sample {sample}); record it first with cache mode 'rw'"
                )
            return None
        return json.loads(row[0])

    def put(self, request: dict[str, Any], response: dict[str, Any], sample: int = 0) -> None:
        if self._db is None or self.mode is CacheMode.REPLAY:
            return
        key = request_key(request, sample)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?,?,?)", (key, canonical(request), canonical(response))
            )

    def __len__(self) -> int:
        if self._db is None:
            return 0
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def default_cache_path() -> Path:
    import os

    home = os.environ.get("TRIFORGE_HOME") or str(Path.home() / ".cache" / "triforge")
    return Path(home) / "responses.sqlite"


def open_cache(mode: str | None, path: str | Path | None = None) -> ResponseCache | None:
    """The response cache for a CLI run: None when off; `mode` defaults to the config file's `cache`."""
    if mode is None:
        from triforge.core.config import load_settings

        mode = load_settings().cache
    if mode not in ("off", "rw", "replay"):
        raise UserError(f"cache mode must be off, rw or replay, not {mode!r}")
    if mode == "off":
        return None
    return ResponseCache(path or default_cache_path(), mode)
