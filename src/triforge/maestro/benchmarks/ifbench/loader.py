"""Load IFBench test prompts and split them deterministically."""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError
from triforge.data import find_file, read_text
from triforge.data import resolve_path as resolve_data_path
from triforge.maestro.benchmarks.base import Example

ENV_VAR = "TRIFORGE_IFBENCH"
FILE_NAME = "IFBench_test.jsonl"
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class IFBenchExample(Example):
    """An IFBench prompt. `inputs = {"prompt"}`; `gold = {"instruction_id_list", "kwargs"}`.

    `kwargs` holds one dict per instruction with the null entries removed.
    """

    @property
    def prompt(self) -> str:
        return str(self.inputs["prompt"])

    @property
    def instruction_id_list(self) -> list[str]:
        return list(self.gold["instruction_id_list"])

    @property
    def kwargs(self) -> list[dict[str, Any]]:
        return [dict(k) for k in self.gold["kwargs"]]


def resolve_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The IFBench_test.jsonl(.gz) to read: a data set's name (default: the bundled `ifbench`, or
    $TRIFORGE_IFBENCH), a file, or a folder holding the file."""
    p = resolve_data_path(path, "ifbench")
    if p.is_dir():
        p = find_file(p, FILE_NAME) or p / FILE_NAME
    if not p.is_file():
        raise UserError(f"IFBench data file not found: {p} (pass a data set name or a path, or set {ENV_VAR})")
    return p


def load_ifbench(path: str | os.PathLike[str] | None = None) -> list[IFBenchExample]:
    """Read every prompt of the benchmark file, in file order."""
    p = resolve_path(path)
    out: list[IFBenchExample] = []
    # the whole file at once: a file that is not text is one line (`read_text`), not a traceback
    for lineno, line in enumerate(read_text(p).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            ids = list(row["instruction_id_list"])
            kwargs = [{k: v for k, v in (kw or {}).items() if v is not None} for kw in row["kwargs"]]
            prompt = str(row["prompt"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise UserError(f"{p}:{lineno}: not an IFBench record ({exc})") from None
        if len(kwargs) != len(ids):
            raise UserError(f"{p}:{lineno}: {len(ids)} instructions but {len(kwargs)} kwargs")
        out.append(
            IFBenchExample(
                id=str(row.get("key", lineno)),
                inputs={"prompt": prompt},
                gold={"instruction_id_list": ids, "kwargs": kwargs},
            )
        )
    return out


def split_ifbench(
    examples: list[IFBenchExample], seed: int = 0, fractions: tuple[float, float] = (0.5, 0.25)
) -> dict[str, list[IFBenchExample]]:
    """Seeded shuffle, then `train` / `val` / `test` by the given train and val fractions."""
    order = list(examples)
    random.Random(seed).shuffle(order)
    n_train = int(len(order) * fractions[0])
    n_val = int(len(order) * fractions[1])
    return {
        "train": order[:n_train],
        "val": order[n_train : n_train + n_val],
        "test": order[n_train + n_val :],
    }


def load_split(split: str, path: str | os.PathLike[str] | None = None, seed: int = 0) -> list[IFBenchExample]:
    if split not in SPLITS:
        raise UserError(f"unknown IFBench split {split!r}: use one of {', '.join(SPLITS)}")
    return split_ifbench(load_ifbench(path), seed=seed)[split]


def _loose_key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


class PromptIndex:
    """Find the benchmark example a response was written for, by its prompt.

    Tries the exact prompt, then the stripped prompt (as the official evaluation does),
    then the prompt with only letters and digits kept, then the same for the last
    tab-separated field (some published response files carry prompts glued to TSV
    debris from the upstream data, with damaged quoting).
    """

    def __init__(self, examples: list[IFBenchExample]):
        self._exact: dict[str, IFBenchExample] = {}
        self._loose: dict[str, IFBenchExample] = {}
        for ex in examples:
            self._exact.setdefault(ex.prompt, ex)
            self._exact.setdefault(ex.prompt.strip(), ex)
            self._loose.setdefault(_loose_key(ex.prompt), ex)

    def lookup(self, prompt: str) -> IFBenchExample | None:
        found = self._exact.get(prompt) or self._exact.get(prompt.strip())
        if found is None:
            found = self._loose.get(_loose_key(prompt)) or self._loose.get(_loose_key(prompt.split("\t")[-1]))
        return found
