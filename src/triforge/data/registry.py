"""Data sets by name: the ones bundled with triforge and the ones `triforge data fetch` put in the data folder.

Every `--data` option and every benchmark loader goes through `resolve_path(value, kind)`: a set's name (or
alias) gives that set's file, checked against its manifest on first use in the process; anything else is a path
the user gave, read as it is. Without a value, the kind's environment variable, then its bundled default, is
used. A name wins over a folder of the same name in the working directory (write `./NAME` for the folder).
"""

from __future__ import annotations

import difflib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError
from triforge.data.manifest import MANIFEST, check_files, read_manifest

BUNDLED_ROOT = Path(__file__).resolve().parent
DATA_HOME_ENV = "TRIFORGE_DATA_HOME"


@dataclass(frozen=True)
class Kind:
    """A benchmark's data: the set used when none is named, and the variable that may name another."""

    name: str
    default: str
    env: str


KINDS = {
    "cpbench": Kind("cpbench", "dcp-bench-open", "TRIFORGE_CPBENCH"),
    "ifbench": Kind("ifbench", "ifbench", "TRIFORGE_IFBENCH"),
    "hotpotqa": Kind("hotpotqa", "hotpotqa-mini", "TRIFORGE_HOTPOTQA"),
}
ALIASES = {"mini": "hotpotqa-mini"}


@dataclass(frozen=True)
class DataSet:
    name: str
    root: Path  # the folder holding the set's files and its manifest.json
    manifest: dict[str, Any]
    bundled: bool

    @property
    def kind(self) -> str:
        return str(self.manifest["kind"])

    @property
    def version(self) -> str:
        return str(self.manifest.get("version", ""))

    @property
    def licence(self) -> str:
        return str(self.manifest.get("licence", ""))

    @property
    def items(self) -> dict[str, int]:
        return dict(self.manifest.get("items", {}))

    @property
    def size_bytes(self) -> int:
        return sum(int(f["bytes"]) for f in self.manifest["files"].values())

    def path(self, role: str = "data", *, verify: bool = True) -> Path:
        """The file (or folder) a loader reads for `role` (`data`, or one such as `corpus`, `verdicts`)."""
        entries = self.manifest.get("entries", {})
        if role not in entries:
            raise UserError(f"data set {self.name} has no {role!r} part (it has {', '.join(entries)})")
        if verify:
            ensure_verified(self)
        return self.root / entries[role]

    def check(self) -> list[str]:
        """What differs from the manifest (missing files, sizes, SHA-256 of files and of their contents)."""
        return check_files(self.root, self.manifest["files"])


def data_home() -> Path:
    """Where fetched sets live: $TRIFORGE_DATA_HOME, else $XDG_DATA_HOME/triforge/data, else
    ~/.local/share/triforge/data."""
    explicit = os.environ.get(DATA_HOME_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "triforge" / "data"


def open_set(folder: Path, bundled: bool = False) -> DataSet | None:
    """The set in `folder` (None when it has no manifest)."""
    if folder.name.startswith(".") or not (folder / MANIFEST).is_file():
        return None
    try:
        manifest = read_manifest(folder)
        name = str(manifest["name"])
        if manifest.get("kind") not in KINDS or not isinstance(manifest.get("files"), dict):
            raise KeyError("kind")
    except (ValueError, KeyError, TypeError, OSError) as e:
        raise UserError(f"{folder / MANIFEST}: not a triforge data manifest ({e}); remove the folder or fetch "
                        f"the set again") from None
    return DataSet(name, folder, manifest, bundled)


def bundled_sets() -> list[DataSet]:
    return [ds for d in sorted(BUNDLED_ROOT.iterdir()) if d.is_dir() and (ds := open_set(d, True))]


def fetched_sets() -> list[DataSet]:
    """The sets under the data folder; one whose manifest cannot be read is left out (`data verify` names it)."""
    home = data_home()
    if not home.is_dir():
        return []
    out = []
    for d in sorted(home.iterdir()):
        try:
            ds = open_set(d, False) if d.is_dir() else None
        except UserError:
            ds = None
        if ds is not None:
            out.append(ds)
    return out


def all_sets() -> list[DataSet]:
    return bundled_sets() + fetched_sets()


def find(name: str) -> DataSet | None:
    name = ALIASES.get(name, name)
    folder = BUNDLED_ROOT / name
    if "/" not in name and os.sep not in name and (folder / MANIFEST).is_file():
        ds = open_set(folder, True)
        if ds is not None and ds.name == name:
            return ds
    return next((ds for ds in fetched_sets() if ds.name == name), None)


def get(name: str) -> DataSet:
    """The set called `name` (or an alias), or a one-line error naming the closest ones."""
    ds = find(name)
    if ds is None:
        names = [d.name for d in all_sets()]
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f"; closest: {', '.join(close)}" if close else f"; known: {', '.join(names)}"
        raise UserError(f"no data set named {name!r}{hint} (`triforge data list`)")
    return ds


def lookup(value: str | os.PathLike[str] | None, kind: str) -> DataSet | None:
    """The named set `value` stands for (None: the kind's variable, then its default), or None for a path."""
    spec = KINDS[kind]
    raw = str(value) if value is not None else os.environ.get(spec.env) or spec.default
    ds = find(raw)
    if ds is None:
        return None
    if ds.kind != kind:
        raise UserError(f"data set {ds.name} holds {ds.kind} data, not {kind}; for {kind} use "
                        f"{', '.join(d.name for d in all_sets() if d.kind == kind)} or a path")
    return ds


def resolve_path(value: str | os.PathLike[str] | None, kind: str, role: str = "data") -> Path:
    """The path a loader reads: a named set's (checked), or `value` as a path."""
    ds = lookup(value, kind)
    if ds is not None:
        return ds.path(role)
    raw = str(value) if value is not None else os.environ.get(KINDS[kind].env)
    assert raw is not None  # lookup found the default otherwise
    path = Path(raw).expanduser()
    if not path.exists() and os.sep not in raw and "/" not in raw and "." not in raw:
        names = [d.name for d in all_sets() if d.kind == kind]
        raise UserError(f"no {kind} data set named {raw!r} and no such path; names: {', '.join(names)} "
                        f"(`triforge data list`)")
    return path


_verified: dict[Path, tuple[tuple[str, int, int], ...]] = {}
_lock = threading.Lock()


def _stamp(ds: DataSet) -> tuple[tuple[str, int, int], ...]:
    out = []
    for rel in ds.manifest["files"]:
        try:
            st = (ds.root / rel).stat()
        except OSError:
            return ()
        out.append((rel, st.st_size, st.st_mtime_ns))
    return tuple(out)


def ensure_verified(ds: DataSet) -> None:
    """Check the set's hashes once per process (again only if a file's size or time changed)."""
    with _lock:
        stamp = _stamp(ds)
        if stamp and _verified.get(ds.root) == stamp:
            return
        problems = ds.check()
        if problems:
            fix = ("reinstall triforge" if ds.bundled
                   else f"fetch it again (`triforge data fetch {ds.name.split('@')[0]} --force`)")
            raise UserError(f"data set {ds.name} at {ds.root} does not match its manifest ({problems[0]}"
                            f"{f', and {len(problems) - 1} more' if len(problems) > 1 else ''}): {fix}")
        _verified[ds.root] = stamp
