"""A data set's manifest: what it is, where it came from, and the SHA-256 of every file in it.

`manifest.json` sits in the set's folder. `files` maps each file (path relative to the folder) to its size and
SHA-256; a compressed file also lists `content`: the SHA-256 of each file it holds (the members of a zip, the
one file inside a `.gz`), so the hashes of the upstream files are checked too, not only those of our packing.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
_CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def content_hashes(path: Path) -> dict[str, str] | None:
    """SHA-256 of each file a `.zip` or `.gz` holds (directories left out); None for other files."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            return {i.filename: sha256_bytes(zf.read(i)) for i in zf.infolist() if not i.is_dir()}
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as fh:
            return {path.name[: -len(".gz")]: sha256_bytes(fh.read())}
    return None


def describe_files(root: Path) -> dict[str, dict[str, Any]]:
    """Every file under `root` but the manifest, with its size, SHA-256 and (when compressed) its contents."""
    out: dict[str, dict[str, Any]] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if not p.is_file() or rel == MANIFEST:
            continue
        entry: dict[str, Any] = {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
        if (inner := content_hashes(p)) is not None:
            entry["content"] = inner
        out[rel] = entry
    return out


def write_manifest(root: Path, meta: dict[str, Any]) -> dict[str, Any]:
    manifest = {**meta, "files": describe_files(root)}
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return manifest


def read_manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / MANIFEST).read_text(encoding="utf-8"))


def check_files(root: Path, files: dict[str, dict[str, Any]]) -> list[str]:
    """What differs from the manifest's `files` under `root`, one line each (empty when all hold)."""
    problems: list[str] = []
    for rel, want in files.items():
        p = root / rel
        if not p.is_file():
            problems.append(f"{rel}: missing")
            continue
        if p.stat().st_size != want["bytes"]:
            problems.append(f"{rel}: {p.stat().st_size} bytes, the manifest says {want['bytes']}")
            continue
        data = p.read_bytes()
        if sha256_bytes(data) != want["sha256"]:
            problems.append(f"{rel}: SHA-256 differs from the manifest")
            continue
        if "content" in want:
            problems += [f"{rel}: {m}" for m in _check_content(p, data, want["content"])]
    return problems


def _check_content(path: Path, data: bytes, want: dict[str, str]) -> list[str]:
    try:
        if path.suffix == ".zip":
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                have = {i.filename: sha256_bytes(zf.read(i)) for i in zf.infolist() if not i.is_dir()}
        else:
            have = {path.name[: -len(".gz")]: sha256_bytes(gzip.decompress(data))}
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        return [f"cannot be read ({e})"]
    out = [f"{name}: SHA-256 differs from the manifest" for name, h in want.items() if have.get(name) != h]
    out += [f"{name}: not in the manifest" for name in sorted(set(have) - set(want))]
    return out


def refresh_manifest(root: Path) -> dict[str, Any]:
    """Re-hash the files of a set whose data a maintainer changed, keeping its description."""
    meta = {k: v for k, v in read_manifest(root).items() if k != "files"}
    return write_manifest(root, meta)

