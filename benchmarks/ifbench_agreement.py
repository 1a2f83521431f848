"""Agreement of triforge's offline IFBench checkers with the official verdicts.

Reads IFBench_test.jsonl and sample_verdicts.jsonl (default: the bundled ifbench set, or
$TRIFORGE_IFBENCH, or the folder given as the first argument), scores every sampled
response in strict and loose mode, prints the per-type agreement table and writes
benchmarks/results/ifbench-agreement-<date>.{json,md}.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

from triforge.maestro.benchmarks.ifbench import load_ifbench, resolve_path
from triforge.maestro.benchmarks.ifbench.agreement import load_verdicts, measure_agreement
from triforge.maestro.benchmarks.ifbench.text import SYLLABLE_COUNTER

DATE = "2026-12-02"
RESULTS = Path(__file__).resolve().parent / "results"
TARGET = 0.98


def main(argv: list[str]) -> int:
    data_file = resolve_path(argv[0] if argv else None)
    examples = load_ifbench(data_file)
    rows = load_verdicts(data_file.parent)
    t0 = time.perf_counter()
    report = measure_agreement(examples, rows)
    elapsed = time.perf_counter() - t0

    types = sorted(report.by_type["strict"])
    lines = [
        f"# IFBench checker agreement with official verdicts ({DATE})",
        "",
        f"Data: `{data_file.name}` ({len(examples)} prompts) and `sample_verdicts.jsonl` "
        f"({len(rows)} responses, {report.total['strict']} instruction verdicts per mode).",
        f"Python {platform.python_version()}, {platform.machine()}; syllables: {SYLLABLE_COUNTER}; "
        f"scoring took {elapsed:.2f} s for both modes.",
        "Per-type counts are small (1-8 verdicts each): a type's rate moves in big steps.",
        "",
        "| mode | agreed | total | agreement |",
        "|---|---:|---:|---:|",
    ]
    for mode in ("strict", "loose"):
        lines.append(f"| {mode} | {report.agreed[mode]} | {report.total[mode]} | {report.rate(mode):.2%} |")
    lines += ["", "| instruction type | strict | loose | n |", "|---|---:|---:|---:|"]
    below = []
    for iid in types:
        s, lo = report.type_rate("strict", iid), report.type_rate("loose", iid)
        n = report.by_type["strict"][iid][1]
        mark = " **(below 98%)**" if min(s, lo) < TARGET else ""
        if mark:
            below.append(iid)
        lines.append(f"| {iid}{mark} | {s:.0%} | {lo:.0%} | {n} |")
    all_types = {i for e in examples for i in e.instruction_id_list}
    unsampled = sorted(all_types - set(types))
    lines += ["", f"Types below 98%: {', '.join(below) or 'none'}."]
    lines += [
        f"Types in the benchmark with no sampled verdict (unit-tested only): {', '.join(unsampled) or 'none'}."
    ]
    if report.disagreements:
        lines += ["", "## Disagreements", ""]
        for d in report.disagreements:
            lines.append(
                f"- {d.mode} `{d.instruction_id}`: ours {d.ours}, official {d.official}: {d.response_head!r}"
            )
    md = "\n".join(lines) + "\n"
    print(md)

    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "date": DATE,
        "python": platform.python_version(),
        "syllable_counter": SYLLABLE_COUNTER,
        "prompts": len(examples),
        "responses": len(rows),
        "seconds": round(elapsed, 3),
        "target": TARGET,
        "types_below_target": below,
        "types_unsampled": unsampled,
        "modes": report.as_dict(),
        "disagreements": [d.__dict__ for d in report.disagreements],
    }
    (RESULTS / f"ifbench-agreement-{DATE}.json").write_text(
        json.dumps(payload, indent=2) + "\n", encoding="utf-8"
    )
    (RESULTS / f"ifbench-agreement-{DATE}.md").write_text(md, encoding="utf-8")
    return 0 if min(report.rate("strict"), report.rate("loose")) >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
