"""Fetch a newer upstream version of a data set: GitHub's zip archive of the repository at a ref.

The archive is downloaded into a hidden temporary folder beside the destination, checked (the published
SHA-256 when given, the zip's own CRCs, the set's layout), unpacked there with a manifest of every file, and
only then renamed into place, so a failed or interrupted fetch leaves nothing behind. The base URL
(`https://github.com`) can be replaced with `--base-url` or $TRIFORGE_DATA_URL, for a mirror or a test server.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from triforge.core.errors import UserError
from triforge.data.manifest import write_manifest
from triforge.data.registry import DataSet, data_home, open_set

BASE_URL_ENV = "TRIFORGE_DATA_URL"
DEFAULT_BASE_URL = "https://github.com"
MAX_BYTES = 512 << 20
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")


class FetchError(UserError):
    """A download or an archive that cannot become a data set."""


@dataclass(frozen=True)
class Upstream:
    repo: str  # owner/name on GitHub
    kind: str
    licence: str
    keep: Callable[[str], str | None]  # archive path (top folder removed) -> where it goes in the set, or None
    entry: str  # what `--data NAME@REF` reads, relative to the set's folder
    count: Callable[[Path], dict[str, int]]  # the set's items; raises FetchError when the layout is wrong


def _keep_dcp(rel: str) -> str | None:
    return rel if rel.startswith("dataset/") or rel in ("LICENSE", "SOURCES.md") else None


def _keep_ifbench(rel: str) -> str | None:
    if rel in ("data/IFBench_test.jsonl", "IFBench_test.jsonl"):
        return "IFBench_test.jsonl"
    return rel if rel == "LICENSE" else None


def _count_dcp(root: Path) -> dict[str, int]:
    folder = root / "dataset"
    ids = [d for d in folder.iterdir() if d.is_dir()] if folder.is_dir() else []
    good = [d for d in ids if (d / f"{d.name}.cpmpy.py").is_file() and (d / f"{d.name}.json").is_file()]
    if not good:
        raise FetchError("the archive holds no dataset/<id>/<id>.cpmpy.py with its <id>.json: not the "
                         "DCP-Bench-Open layout")
    return {"problems": len(good)}


def _count_ifbench(root: Path) -> dict[str, int]:
    path = root / "IFBench_test.jsonl"
    if not path.is_file():
        raise FetchError("the archive holds no data/IFBench_test.jsonl: not the IFBench layout")
    n = 0
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            ok = isinstance(row["prompt"], str) and isinstance(row["instruction_id_list"], list)
        except (json.JSONDecodeError, KeyError, TypeError):
            ok = False
        if not ok:
            raise FetchError(f"IFBench_test.jsonl:{lineno}: not an IFBench record")
        n += 1
    return {"prompts": n}


UPSTREAMS = {
    "dcp-bench-open": Upstream("DCP-Bench/DCP-Bench-Open", "cpbench", "Apache-2.0", _keep_dcp, ".", _count_dcp),
    "ifbench": Upstream("allenai/IFBench", "ifbench", "ODC-BY-1.0 (data), Apache-2.0 (code)", _keep_ifbench,
                        "IFBench_test.jsonl", _count_ifbench),
}


def archive_url(name: str, ref: str, base_url: str | None = None) -> str:
    base = (base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")
    return f"{base}/{UPSTREAMS[name].repo}/archive/{urllib.parse.quote(ref, safe='/')}.zip"


def fetch(name: str, ref: str = "main", *, to: str | Path | None = None, base_url: str | None = None,
          sha256: str | None = None, force: bool = False, timeout_s: float = 60.0) -> DataSet:
    """Download `name` at `ref` into the data folder (as `NAME@REF`) or into `to`; return the new set."""
    if name not in UPSTREAMS:
        raise UserError(f"{name!r} cannot be fetched: fetchable sets are {', '.join(UPSTREAMS)}")
    if not _REF.match(ref) or ".." in ref.split("/"):
        raise UserError(f"--ref {ref!r}: give a branch, tag or commit (letters, digits, . _ - /)")
    if sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        raise UserError("--sha256 takes the archive's SHA-256 as 64 hex digits")
    up = UPSTREAMS[name]
    dest = Path(to).expanduser() if to is not None else data_home() / f"{name}@{ref.replace('/', '_')}"
    if dest.exists() and not force and (dest.is_file() or any(dest.iterdir())):
        raise UserError(f"{dest} already exists: pass --force to replace it, or another --to")
    dest.parent.mkdir(parents=True, exist_ok=True)
    url = archive_url(name, ref, base_url)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent))
    try:
        archive = work / "archive.zip"
        digest = _download(url, archive, timeout_s)
        if sha256 is not None and digest != sha256.lower():
            raise FetchError(f"{url}: SHA-256 {digest} differs from the published {sha256.lower()}")
        staged = work / "set"
        _unpack(archive, staged, up.keep, url)
        archive.unlink()
        items = up.count(staged)
        write_manifest(staged, {
            "name": f"{name}@{ref}", "kind": up.kind, "title": f"{name} at {ref}, fetched from upstream",
            "version": ref, "licence": up.licence, "source": url, "archive_sha256": digest,
            "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"), "items": items,
            "entries": {"data": up.entry},
        })
        _move_into_place(staged, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    loaded = open_set(dest, bundled=False)
    assert loaded is not None
    return loaded


def _download(url: str, target: Path, timeout_s: float) -> str:
    """Write the body at `url` to `target`; its SHA-256. A short or failed download is a FetchError."""
    req = urllib.request.Request(url, headers={"User-Agent": "triforge-data-fetch"})
    h = hashlib.sha256()
    got = 0
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp, target.open("wb") as out:
            length = resp.headers.get("Content-Length")
            while chunk := resp.read(1 << 16):
                got += len(chunk)
                if got > MAX_BYTES:
                    raise FetchError(f"{url}: larger than {MAX_BYTES >> 20} MiB; not a data set archive")
                h.update(chunk)
                out.write(chunk)
    except urllib.error.HTTPError as e:
        raise FetchError(f"{url}: HTTP {e.code} {e.reason} (is the ref right?)") from None
    except http.client.IncompleteRead as e:
        raise FetchError(f"{url}: download cut short after {got + len(e.partial)} bytes; try again") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise FetchError(f"{url}: cannot download ({reason})") from None
    if length is not None and length.isdigit() and got != int(length):
        raise FetchError(f"{url}: download cut short ({got} of {length} bytes); try again")
    return h.hexdigest()


def _unpack(archive: Path, staged: Path, keep: Callable[[str], str | None], url: str) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            bad = zf.testzip()
            if bad is not None:
                raise FetchError(f"{url}: the archive is damaged ({bad} fails its CRC check)")
            infos = [i for i in zf.infolist() if not i.is_dir()]
            tops = {i.filename.split("/", 1)[0] for i in infos}
            strip = len(tops) == 1 and all("/" in i.filename for i in infos)  # GitHub: <repo>-<ref>/...
            for info in infos:
                rel = info.filename.split("/", 1)[1] if strip else info.filename
                target = keep(rel)
                if target is None:
                    continue
                parts = PurePosixPath(target).parts
                if PurePosixPath(target).is_absolute() or ".." in parts or "\\" in target:
                    raise FetchError(f"{url}: the archive has an unsafe path {info.filename!r}")
                out = staged.joinpath(*parts)
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error) as e:
        raise FetchError(f"{url}: not a readable zip archive ({e}); the download may be damaged") from None
    if not staged.is_dir():
        raise FetchError(f"{url}: the archive holds none of the data set's files")


def _move_into_place(staged: Path, dest: Path) -> None:
    """Rename the finished set to `dest`; an earlier one there (with --force) is swapped out first."""
    old: Path | None = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.{os.getpid()}.old")
        os.rename(dest, old)
    try:
        os.rename(staged, dest)
    except OSError:
        if old is not None:
            os.rename(old, dest)
        raise
    if old is not None:
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()
