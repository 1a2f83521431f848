"""The state file of `triforge local serve`, so `status`, `stop` and other runs find a shared server."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from triforge.local.paths import local_dir, read_json, write_json
from triforge.local.server import LocalServer, healthy, stop_group


def state_file() -> Path:
    return local_dir() / "server.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def record(srv: LocalServer, model_path: Path, *, detached: bool) -> dict[str, Any]:
    data = {
        "pid": srv.pid, "port": srv.port, "base_url": srv.base_url, "model_path": str(model_path),
        "n_threads": srv.options.n_threads if srv.options else None,
        "n_ctx": srv.options.n_ctx if srv.options else None,
        "chat_format": srv.options.chat_format if srv.options else None,
        "log": str(srv.log_path), "started": time.time(), "owner_pid": os.getpid(), "detached": detached,
    }
    write_json(state_file(), data)
    return data


def clear(pid: int | None = None) -> None:
    """Remove the state file (only if it still names `pid`, when given)."""
    data = read_json(state_file())
    if data is None or pid is None or data.get("pid") == pid:
        state_file().unlink(missing_ok=True)


def running(check_health: bool = True) -> dict[str, Any] | None:
    """The recorded server if its process lives (and answers, with `check_health`); stale files are removed."""
    data = read_json(state_file())
    if data is None:
        return None
    pid = data.get("pid")
    if not isinstance(pid, int) or not _pid_alive(pid):
        clear()
        return None
    if check_health and not healthy(str(data.get("base_url", "")), timeout=2.0):
        data["healthy"] = False
        return data
    data["healthy"] = True
    return data


def stop_recorded(grace_s: float = 5.0) -> dict[str, Any] | None:
    """Stop the recorded server (its whole process group); returns what was stopped, or None."""
    data = running(check_health=False)
    if data is None:
        return None
    stop_group(int(data["pid"]), grace_s)
    clear()
    return data
