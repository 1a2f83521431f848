"""Markdown from the files benchmarks/device_astra_speed.sh leaves under $OUT.

    python benchmarks/astra_speed_report.py DIR --card "NVIDIA H200" > benchmarks/results/astra-speed-DATE-CARD.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def _load(d: Path, name: str) -> dict | None:
    p = d / name
    return json.loads(p.read_text()) if p.is_file() else None


def warm_section(d: Path) -> list[str]:
    out = ["## `astra check` from the CLI (vectorised silu_and_mul, a correct kernel)", "",
           "| tree | --no-warm | warm, first (starts the worker) | warm p50 (runs) | --no-timing | oracle s | timing s |",
           "|---|---|---|---|---|---|---|"]
    for label, name in (("before (b21e5a7)", "warm-old.json"), ("this tree", "warm-new.json")):
        w = _load(d, name)
        if w is None:
            continue
        split = w.get("warm_split") or {}
        out.append(f"| {label} | {w['cold_no_warm_s']:.1f} s | {w['warm_first_s']:.1f} s | {w['warm_p50_s']:.2f} s "
                   f"({', '.join(f'{t:.2f}' for t in w['warm_s'])}) | {w.get('warm_no_timing_s', 0):.2f} s | "
                   f"{split.get('oracle_s', 0):.2f} | {split.get('timing_s', 0):.2f} |")
    w = _load(d, "warm-new.json")
    if w and w.get("timings"):
        out += ["", "Timing rows of the last warm check (this tree):", "",
                "| shape | baseline us | candidate us | A/A | runs | of roof | of peak | graph A/A |", "|---|---|---|---|---|---|---|---|"]
        for t in w["timings"]:
            g = t.get("graph_aa_spread")
            out.append(f"| {t['shape']} | {t['baseline_us']:.2f} | {t['candidate_us']:.2f} | {100 * t['aa_spread']:.2f}% | "
                       f"{t['runs']} | {100 * t['roofline_fraction']:.0f}% | {100 * t['peak_fraction']:.0f}% | "
                       f"{'-' if g is None else f'{100 * g:.2f}%'} |")
    if w and w.get("roofline"):
        r = w["roofline"]
        out += ["", f"Roofline: achievable {r['achievable_gbs']:.0f} GB/s (read {r['read_gbs']:.0f} GB/s, {r['read_config']}; "
                f"copy {r['copy_gbs']:.0f} GB/s, {r['copy_config']}); datasheet peak {r['peak_gbs']:.0f} GB/s; "
                f"torch's copy_ {r['torch_copy_gbs']:.0f} GB/s."]
    return out


def budget_section(d: Path) -> list[str]:
    out = []
    for label, name in (("before (b21e5a7)", "budget-old.json"), ("this tree", "budget-new.json")):
        b = _load(d, name)
        if b is None:
            continue
        f = b["flush"]
        out += [f"## Timing budget, {label}", "",
                f"L2 {f['l2_bytes'] >> 20} MB; the lab's flush buffer {f['lab_flush_bytes'] >> 20} MB. A "
                f"{f.get('hot_bytes', 12 << 20) >> 20} MB tensor the L2 held, read right after each flush (median of 60, us); "
                "the flush's own time." + ("" if f.get("busy_before_read") else
                " This run's probe did not keep the GPU busy before the timed read, so the `none` row also counts the "
                "host's launch latency (the GPU sat idle) and is no L2-hot control; the flush rows, queued behind the "
                "flush, are not affected."), "",
                "| flush | read, clean | read, after writing it | flush us |", "|---|---|---|---|"]
        for k in f["read_us"]:
            out.append(f"| {k} | {f['read_us'][k]:.2f} | {f['dirty_read_us'][k]:.2f} | {f['flush_us'][k]:.1f} |")
        out += ["", "One timing round's parts (synchronised, median of 30, us):", "",
                "| shape | make inputs | poison | flush | call | check |", "|---|---|---|---|---|---|"]
        for r in b["round_parts"]:
            out.append(f"| {r['shape']} | {r['make_inputs_us']:.0f} | {r['poison_us']:.0f} | {r['flush_us']:.0f} | "
                       f"{r['call_us']:.0f} | {r['check_us']:.0f} |")
        ev = b["evals"]
        timing = ", ".join(f"{e['timing_s']:.2f}" for e in ev)
        oracle = ", ".join(f"{e['oracle_s']:.2f}" for e in ev)
        aa = "; ".join("/".join(f"{100 * a:.1f}%" for a in e["aa"]) for e in ev)
        med = statistics.median(e["timing_s"] for e in ev)
        out += ["", f"In-process `evaluate`, {len(ev)} times: timing {timing} s (median {med:.2f}); oracle {oracle} s; "
                f"A/A per shape {aa}; verdicts {', '.join(e['verdict'] for e in ev)}.", ""]
    return out


def compare_section(d: Path) -> list[str]:
    out = []
    for p in sorted(d.glob("compare-*.json")):
        c = json.loads(p.read_text())
        out += [f"## `astra compare --task {c['task']}`", "",
                "| shape | comparator | median us | vs baseline | noise | graph us | GB/s | of roof | verified |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in c["rows"]:
            g = r.get("graph_us")
            out.append(f"| {r['shape']} | {r['comparator']} | {r['median_us']:.2f} | {r['speedup_vs_baseline']:.2f}x | "
                       f"{100 * r['aa_spread']:.2f}% | {'-' if not g else f'{g:.2f}'} | {r['gbs']:.0f} | "
                       f"{100 * r['roofline_fraction']:.0f}% | {r['verified']} |")
        out += [""] + [f"- note: {n}" for n in c.get("notes", [])] + [""]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--card", required=True)
    ap.add_argument("--date", default="")
    args = ap.parse_args()
    d = Path(args.dir)
    gpu = (d / "gpu.txt").read_text().strip() if (d / "gpu.txt").is_file() else args.card
    lines = [f"# astra check speed, roofline and FlashInfer from its headers, {args.date or 'see file name'}", "",
             f"Card: {args.card}. Device output: `{gpu.splitlines()[0] if gpu else ''}`; "
             f"{gpu.splitlines()[-1] if gpu else ''}. Made by `benchmarks/device_astra_speed.sh` "
             "and `benchmarks/astra_speed_report.py`.", ""]
    lines += warm_section(d) + [""] + budget_section(d) + compare_section(d)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
