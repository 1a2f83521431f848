"""What a result depends on, and the run-directory guard that keeps results from mixing settings.

A run directory records the settings fingerprint of the run that made its results (`provenance.json`):
model and endpoint, decoding settings, prompts, data, limits and the triforge version. A later run
into the same directory reuses results only when its fingerprint is the same; otherwise it refuses
with one line naming the fields that differ. `fresh=True` moves earlier contents aside into
`previous-<UTC time>/` (nothing is deleted). Each result row carries `stamp()`: the settings hash
and the git commit the code came from (recorded, not compared: an unrelated commit keeps a run
resumable, while a release changes the compared version).
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError
from triforge.core.rundir import write_json_atomic

PROVENANCE_FILE = "provenance.json"
# Files whose presence means a directory already holds results.
RESULT_FILES = ("results.json", "results.jsonl")
# The model settings that change what a model replies (timeouts, prices and concurrency do not).
REPLY_FIELDS = ("model", "base_url", "temperature", "max_tokens", "extra_body", "json_mode", "native_tools")
# What the model is declared to take (and where an Azure deployment is): recorded only when set, so the
# settings of runs made before these fields existed still match.
DECLARED_FIELDS = ("api_type", "deployment", "reasoning_effort", "token_limit_param", "supports_temperature",
                   "supports_stop", "send_reasoning_back")


class StaleResults(UserError):
    """A run directory holds results made with other settings."""


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_hash(obj: Any) -> str:
    """A short hash of any JSON-able value (text hashes as itself)."""
    data = obj if isinstance(obj, str) else canonical(obj)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]


def file_hash(path: str | Path | None) -> str | None:
    """The hash of a file's bytes, or of a folder's files (names and bytes); None for no path."""
    if path is None:
        return None
    p = Path(path)
    h = hashlib.sha256()
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p] if p.is_file() else []
    for f in files:
        h.update(str(f.relative_to(p) if p.is_dir() else f.name).encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()[:16] if files else None


@functools.lru_cache(maxsize=1)
def code_version() -> dict[str, str | None]:
    """triforge's version and, when it runs from a git checkout, the commit (with `+dirty` for local edits)."""
    from triforge import __version__

    return {"triforge": __version__, "commit": commit_of(Path(__file__).resolve().parent)}


def commit_of(here: Path) -> str | None:
    """The commit of the checkout holding `here` (`+dirty` when files under `here`'s parent differ), or None.

    git refuses a checkout owned by another user ("dubious ownership") unless told it is safe: reading a
    commit changes nothing, so this call says so; where git cannot run at all, HEAD is read from the files.
    """
    git = ["git", "-c", "safe.directory=*"]
    try:
        head = subprocess.run([*git, "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return _head_from_files(here)
        commit = head.stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no", "--", str(here.parent)],
                               cwd=here, capture_output=True, text=True, timeout=10)
        if dirty.returncode == 0 and dirty.stdout.strip():
            commit += "+dirty"
        return commit
    except (OSError, subprocess.SubprocessError):
        return _head_from_files(here)


def _head_from_files(here: Path) -> str | None:
    """HEAD's commit from `.git` itself (a loose ref, packed-refs, or a detached HEAD), without git."""
    for folder in (here, *here.parents):
        dot = folder / ".git"
        if dot.is_file():  # a worktree or submodule: "gitdir: PATH"
            text = dot.read_text(encoding="utf-8", errors="replace").strip()
            dot = (folder / text.removeprefix("gitdir:").strip()).resolve()
        if not (dot / "HEAD").is_file():
            continue
        try:
            head = (dot / "HEAD").read_text(encoding="utf-8").strip()
            if not head.startswith("ref:"):
                return head or None
            ref = head.removeprefix("ref:").strip()
            common = dot
            if (dot / "commondir").is_file():
                common = (dot / (dot / "commondir").read_text(encoding="utf-8").strip()).resolve()
            for base in dict.fromkeys((dot, common)):
                if (base / ref).is_file():
                    return (base / ref).read_text(encoding="utf-8").strip() or None
                packed = base / "packed-refs"
                if packed.is_file():
                    for line in packed.read_text(encoding="utf-8").splitlines():
                        sha, _, name = line.partition(" ")
                        if name.strip() == ref:
                            return sha
        except OSError:
            return None
        return None
    return None


def model_settings(llm: Any) -> dict[str, Any]:
    """The reply-changing settings of a model client (anything with a `config` like `ModelConfig`)."""
    cfg = getattr(llm, "config", None)
    if cfg is None:
        return {"client": type(llm).__name__}
    out = {name: getattr(cfg, name, None) for name in REPLY_FIELDS}
    defaults = getattr(type(cfg), "model_fields", {})
    for name in DECLARED_FIELDS:
        value = getattr(cfg, name, None)
        if name in defaults and value != defaults[name].default:
            out[name] = value
    return out


@dataclass(frozen=True)
class Fingerprint:
    """The settings of one run, as nested JSON-able fields; `hash` identifies them."""

    fields: dict[str, Any]

    @classmethod
    def of(cls, **fields: Any) -> Fingerprint:
        return cls(json.loads(canonical({**fields, "triforge": code_version()["triforge"]})))

    @property
    def hash(self) -> str:
        return content_hash(self.fields)

    def differences(self, other: dict[str, Any]) -> list[str]:
        """Dotted names of the fields that differ from `other` (one level into nested fields)."""
        out = []
        for key in sorted(set(self.fields) | set(other)):
            mine, theirs = self.fields.get(key), other.get(key)
            if mine == theirs:
                continue
            if isinstance(mine, dict) and isinstance(theirs, dict):
                out += [f"{key}.{k}" for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]
            else:
                out.append(key)
        return out

    def stamp(self) -> dict[str, Any]:
        """What every result row records: the settings hash and the commit its code came from."""
        return {"settings_hash": self.hash, "commit": code_version()["commit"]}


def move_aside(path: Path) -> Path | None:
    """Move everything in `path` (except earlier `previous-*` folders) into `path/previous-<UTC time>/`."""
    entries = [e for e in path.iterdir() if not e.name.startswith("previous-")] if path.is_dir() else []
    if not entries:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path / f"previous-{stamp}"
    n = 1
    while target.exists():
        n += 1
        target = path / f"previous-{stamp}-{n}"
    target.mkdir()
    for e in entries:
        e.rename(target / e.name)
    return target


def guard_run_dir(path: str | Path, fp: Fingerprint, *, fresh: bool = False) -> Path | None:
    """Claim `path` for a run with settings `fp`: refuse when it holds results made with other settings.

    Returns the folder earlier contents were moved into when `fresh`, else None. Writes provenance.json.
    """
    path = Path(path)
    moved = move_aside(path) if fresh else None
    path.mkdir(parents=True, exist_ok=True)
    record = path / PROVENANCE_FILE
    if record.is_file():
        try:
            stored = json.loads(record.read_text(encoding="utf-8"))["fingerprint"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise StaleResults(f"{record} is unreadable, so its results cannot be trusted; "
                               "use a new --out or --fresh") from None
        if diff := fp.differences(stored):
            verb = "differs" if len(diff) == 1 else "differ"
            raise StaleResults(f"{path} holds results made with other settings ({', '.join(diff)} {verb}); "
                               "use a new --out or --fresh")
    elif any((path / f).exists() for f in RESULT_FILES):
        raise StaleResults(f"{path} holds results with no record of their settings (made by an older triforge); "
                           "use a new --out or --fresh")
    write_json_atomic(record, {"fingerprint": fp.fields, "settings_hash": fp.hash, **code_version()})
    return moved


def stale_items(rows: dict[str, str | None], current: dict[str, str]) -> list[str]:
    """Ids whose stored item hash differs from the current one (the data changed under the same name)."""
    return sorted(k for k, h in rows.items() if k in current and h != current[k])


def refuse_stale_items(path: str | Path, ids: list[str]) -> None:
    if ids:
        more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
        raise StaleResults(f"{path} holds results for data that has changed since ({', '.join(ids[:3])}{more}); "
                           "use a new --out or --fresh")
