"""HotpotQA loaders (official JSON files, the Hugging Face export, the bundled sets) and splits.

Bundled: `hotpotqa-mini` (alias `mini`, the default: 20 made-up questions and their own 60 abstracts) and
`hotpotqa-hard-500` (500 real questions; their 4,960 context paragraphs are the retrieval corpus).

Records become `Example(id, inputs={"question"}, gold={"answer", "titles", "type", "level"})`, where
`titles` are the gold (supporting-fact) document titles in first-mention order.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError
from triforge.data import get, lookup, read_text
from triforge.data import resolve_path as resolve_data_path
from triforge.maestro.benchmarks.base import Example
from triforge.maestro.bm25 import Passage, load_corpus

ENV_VAR = "TRIFORGE_HOTPOTQA"
CORPUS_ENV_VAR = "TRIFORGE_HOTPOTQA_CORPUS"
SPLITS = ("train", "val", "test", "all")
MINI = "mini"


def _supporting_titles(sf: Any) -> list[str]:
    if isinstance(sf, dict):  # Hugging Face: {"title": [...], "sent_id": [...]}
        titles = sf.get("title", [])
    else:  # official: [[title, sentence index], ...]
        titles = [pair[0] for pair in sf or []]
    return list(dict.fromkeys(str(t) for t in titles))


def _context_passages(ctx: Any) -> list[Passage]:
    if isinstance(ctx, dict):  # Hugging Face: {"title": [...], "sentences": [[...], ...]}
        pairs = zip(ctx.get("title", []), ctx.get("sentences", []), strict=False)
    else:  # official: [[title, [sentences]], ...]
        pairs = ((c[0], c[1]) for c in ctx or [])
    return [Passage(str(t), "".join(s)) for t, s in pairs]


def _read_records(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        raise UserError(
            f"{path}: parquet is not read; export the split as JSON lines "
            f"(datasets: ds.to_json('hotpotqa.jsonl')) and pass that file"
        )
    text = read_text(path)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError(f"{path} is not valid JSON: {e.msg} at line {e.lineno}") from None
        return list(data)
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise UserError(f"{path}:{lineno}: not a JSON line (expected HotpotQA records)") from None
    return rows


def to_example(row: dict[str, Any], where: str = "") -> Example:
    if not isinstance(row, dict) or (row.get("_id") or row.get("id")) is None:
        raise UserError(f"{where}: not a HotpotQA record (it needs '_id' or 'id', 'question' and 'answer')")
    try:
        rid = str(row.get("_id") or row["id"])
        question, answer = str(row["question"]), str(row["answer"])
    except KeyError as e:
        raise UserError(f"{where}: a HotpotQA record lacks {e.args[0]!r}") from None
    gold = {
        "answer": answer,
        "titles": _supporting_titles(row.get("supporting_facts")),
        "type": row.get("type"),
        "level": row.get("level"),
    }
    return Example(id=rid, inputs={"question": question}, gold=gold)


def resolve_path(path: str | os.PathLike[str] | None) -> Path | str:
    """A bundled or fetched set's name (None: $TRIFORGE_HOTPOTQA, else `hotpotqa-mini`), or the file's path."""
    ds = lookup(path, "hotpotqa")
    if ds is not None:
        return ds.name
    p = resolve_data_path(path, "hotpotqa")
    if not p.is_file():
        raise UserError(f"HotpotQA file {p} not found (pass --data FILE or a data set name such as "
                        f"hotpotqa-hard-500, or set {ENV_VAR})")
    return p


def load_hotpotqa(path: str | os.PathLike[str] | None = None) -> tuple[list[Example], list[Passage]]:
    """Examples, and the passages of their context paragraphs (empty for the mini set's records).

    `path` is an official JSON file (a list of records), a Hugging Face JSONL export (plain or .gz), or a data
    set's name (`hotpotqa-mini`, the default when neither it nor $TRIFORGE_HOTPOTQA is set; `hotpotqa-hard-500`).
    """
    where = resolve_path(path)
    p = get(where).path("data") if isinstance(where, str) else where
    rows = _read_records(p)
    examples = [to_example(r, f"{p}:{i + 1}") for i, r in enumerate(rows)]
    seen: dict[str, Passage] = {}
    for r in rows:
        for psg in _context_passages(r.get("context")):
            seen.setdefault(psg.title, psg)
    return examples, list(seen.values())


def load_hotpotqa_corpus(
    path: str | os.PathLike[str] | None = None, fallback: list[Passage] | None = None
) -> list[Passage]:
    """The abstracts to retrieve from: a JSONL file, $TRIFORGE_HOTPOTQA_CORPUS, a data set's name (its
    abstracts, or else its questions' context paragraphs), `fallback`, or the mini set's abstracts."""
    raw = path if path is not None else os.environ.get(CORPUS_ENV_VAR)
    if raw is None:
        if fallback:
            return fallback
        raw = MINI
    ds = lookup(raw, "hotpotqa")
    if ds is None:
        return load_corpus(raw)
    if "corpus" in ds.manifest.get("entries", {}):
        return load_corpus(ds.path("corpus"))
    return load_hotpotqa(ds.name)[1]


def split_examples(
    examples: list[Example], split: str, *, seed: int = 0, fractions: tuple[float, float] = (0.5, 0.25)
) -> list[Example]:
    """Seeded shuffle, then `train` / `val` / `test` by the train and val fractions; `all` keeps every one."""
    if split not in SPLITS:
        raise UserError(f"unknown HotpotQA split {split!r}: use one of {', '.join(SPLITS)}")
    if split == "all":
        return list(examples)
    order = list(examples)
    random.Random(seed).shuffle(order)
    n_train, n_val = int(len(order) * fractions[0]), int(len(order) * fractions[1])
    bounds = {"train": (0, n_train), "val": (n_train, n_train + n_val), "test": (n_train + n_val, len(order))}
    lo, hi = bounds[split]
    return order[lo:hi]
