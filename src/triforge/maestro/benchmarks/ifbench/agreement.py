"""Agreement of our checkers with the official IFBench verdicts (`sample_verdicts.jsonl`)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError
from triforge.data import find_file, read_text, resolve_path
from triforge.maestro.benchmarks.ifbench.loader import IFBenchExample, PromptIndex
from triforge.maestro.benchmarks.ifbench.metric import score_response

VERDICTS_FILE = "sample_verdicts.jsonl"


@dataclass
class Disagreement:
    mode: str
    instruction_id: str
    ours: bool
    official: bool
    response_head: str


@dataclass
class AgreementReport:
    """Per mode: instructions checked and agreed, overall and per instruction type."""

    total: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    agreed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    by_type: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # mode -> id -> [agreed, total]
    disagreements: list[Disagreement] = field(default_factory=list)

    def rate(self, mode: str) -> float:
        return self.agreed[mode] / self.total[mode] if self.total[mode] else 0.0

    def type_rate(self, mode: str, instruction_id: str) -> float:
        agreed, total = self.by_type[mode][instruction_id]
        return agreed / total if total else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            mode: {
                "agreed": self.agreed[mode],
                "total": self.total[mode],
                "agreement": round(self.rate(mode), 4),
                "by_type": {
                    iid: {"agreed": a, "total": t, "agreement": round(a / t, 4)}
                    for iid, (a, t) in sorted(self.by_type[mode].items())
                },
            }
            for mode in self.total
        }


def load_verdicts(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The official verdicts: a data set's name (default: the bundled `ifbench`), a file, or a folder holding
    sample_verdicts.jsonl(.gz)."""
    p = resolve_path(path, "ifbench", role="verdicts")
    if p.is_dir():
        p = find_file(p, VERDICTS_FILE) or p / VERDICTS_FILE
    if not p.is_file():
        raise UserError(f"official verdicts file not found: {p}")
    rows = []
    for lineno, line in enumerate(read_text(p).splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UserError(f"{p}:{lineno}: not valid JSON ({exc.msg})") from None
    return rows


def measure_agreement(
    examples: list[IFBenchExample],
    verdict_rows: list[dict[str, Any]],
    modes: tuple[str, ...] = ("strict", "loose"),
) -> AgreementReport:
    """Score each sampled response with our checkers and compare with the official booleans."""
    index = PromptIndex(examples)
    report = AgreementReport()
    for mode in modes:
        report.by_type[mode] = defaultdict(lambda: [0, 0])
    for row in verdict_rows:
        example = index.lookup(row["prompt"])
        if example is None or example.instruction_id_list != row["instruction_id_list"]:
            raise UserError(f"sampled prompt not in the benchmark: {row['prompt'][:60]!r}")
        for mode in modes:
            ours = score_response(example, row["response"], mode)
            for iid, mine, official in zip(example.instruction_id_list, ours, row[mode], strict=True):
                same = mine == bool(official)
                report.total[mode] += 1
                report.agreed[mode] += same
                report.by_type[mode][iid][0] += same
                report.by_type[mode][iid][1] += 1
                if not same:
                    report.disagreements.append(
                        Disagreement(mode, iid, mine, bool(official), row["response"][:120])
                    )
    return report
