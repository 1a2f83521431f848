"""The benchmarks' data sets, bundled with triforge, and the registry that finds them by name.

Bundled (each folder here holds the data, its LICENSE, PROVENANCE.md and a manifest.json with the SHA-256 of
every file): `dcp-bench-open` (CP-Bench, 101 problems), `ifbench` (300 prompts and 147 official verdicts),
`hotpotqa-hard-500` (500 HotpotQA questions and their paragraphs) and `hotpotqa-mini` (20 made-up questions
for tests). `triforge data fetch` adds newer upstream versions under the user's data folder, selectable by
name as `NAME@REF`. Loaders call `resolve_path(value, kind)` with whatever `--data` held. After changing a
bundled set's files, `triforge.data.manifest.refresh_manifest(folder)` re-hashes them.
"""

from triforge.data.files import find_file, open_text, read_text
from triforge.data.registry import (
    KINDS,
    DataSet,
    all_sets,
    bundled_sets,
    data_home,
    ensure_verified,
    fetched_sets,
    get,
    lookup,
    resolve_path,
)

__all__ = [
    "KINDS",
    "DataSet",
    "all_sets",
    "bundled_sets",
    "data_home",
    "ensure_verified",
    "fetched_sets",
    "find_file",
    "get",
    "lookup",
    "open_text",
    "read_text",
    "resolve_path",
]
