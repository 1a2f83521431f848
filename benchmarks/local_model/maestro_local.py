"""maestro, config-only and GEPA with the real local model on a fixed IFBench split (issue 21's measurement).

Measured 2026-12-05 (benchmarks/results/local-model-maestro-2026-12-05.md): about an hour per optimizer on
2 shared cores. Run it in the background at low priority, after `triforge local install`:

    nice -n 19 .venv/bin/python benchmarks/local_model/maestro_local.py [--budget 100] [--out runs/local-maestro]

The local Qwen2.5-Coder-1.5B model is both the task and the reflection model. The split is fixed: the first
20 train, 10 val and 30 test examples of IFBench's seeded splits (disjoint). Each optimizer runs into its own
run directory with a response cache, one after the other; killing the script and starting it again replays
what was done from the caches and goes on. After each optimizer the table is rewritten
(benchmarks/results/local-model-maestro-DATE.{json,md}), so partial tables can be committed as they grow.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

from smoke import machine

from triforge.local.install import DEFAULT_MODEL, installed_model

RESULTS = Path(__file__).resolve().parents[1] / "results"
TRIFORGE = [str(Path(sys.executable).with_name("triforge"))]
OPTIMIZERS = ("maestro", "config-only", "gepa")
LIMITS = "20,10,30"


def run(optimizer: str, out: Path, budget: int) -> int:
    cmd = [*TRIFORGE, "maestro", "optimize", "--bench", "ifbench", "--model", "local", "--optimizer", optimizer,
           "--max-rollouts", str(budget), "--limits", LIMITS, "--jobs", "1", "--minibatch", "3", "--seed", "0",
           "--out", str(out / optimizer)]
    return subprocess.run(cmd, check=False).returncode


def split_ids() -> dict[str, list[str]]:
    from triforge.maestro.bench import open_benchmark

    b = open_benchmark("ifbench")
    n = dict(zip(("train", "val", "test"), map(int, LIMITS.split(",")), strict=True))
    return {s: [e.id for e in b.examples(s)[: n[s]]] for s in n}


def table(out: Path, budget: int) -> None:
    rows, tests = [], {}
    for opt in OPTIMIZERS:
        p = out / opt / "results.json"
        if p.is_file():
            res = json.loads(p.read_text())
            rows.append(res["summary"])
            tests[opt] = res.get("test") or {}
    model = installed_model()
    day = date.today().isoformat()
    payload = {"date": day, "machine": machine(), "model_file": model.name if model else None,
               "model_sha256": DEFAULT_MODEL.sha256 if model and model.name == DEFAULT_MODEL.name else None,
               "budget": budget, "split": split_ids(), "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"local-model-maestro-{day}.json").write_text(json.dumps(payload, indent=1))
    from triforge.cli.maestro_optimize import compare_table

    md = [f"# maestro with the real local model on IFBench ({day})", "",
          f"- model: `{payload['model_file']}`, SHA-256 `{payload['model_sha256']}` (task and reflection model)",
          f"- split: the first {LIMITS} (train, val, test) examples of the seeded splits; ids in the JSON file",
          f"- budget: {budget} rollouts (train + val) per optimizer; small-model evidence only",
          f"- optimizers finished: {len(rows)} of {len(OPTIMIZERS)}", "", (compare_table(rows) if rows else "(none yet)").rstrip("\n"),
          *noise_lines(tests), *proposal_lines(out)]
    (RESULTS / f"local-model-maestro-{day}.md").write_text("\n".join(md) + "\n")


def noise_lines(tests: dict[str, dict[str, list[dict]]]) -> list[str]:
    """How far test scores move by sampling alone: the seed program is scored once per optimizer on the same
    test examples, so its spread across runs is the noise floor; and per optimizer, the examples the best
    program won and lost against the seed (paired, same examples)."""
    seeds = {o: {e["id"]: e["score"] for e in t["seed"]} for o, t in tests.items() if t.get("seed")}
    if not seeds:
        return []
    lines = ["", "## Noise", ""]
    if len(seeds) > 1:
        ids = sorted(set.intersection(*(set(s) for s in seeds.values())), key=str)
        flipped = [i for i in ids if len({s[i] for s in seeds.values()}) > 1]
        totals = ", ".join(f"{o} {sum(s[i] for i in ids):g}" for o, s in seeds.items())
        lines.append(f"- the unchanged seed program, scored once per run on the same {len(ids)} test examples: "
                     f"{totals} (sum of scores); {len(flipped)} examples changed score between runs. "
                     "Differences between rows smaller than this are sampling noise.")
    for o, t in tests.items():
        if t.get("seed") and t.get("best"):
            best = {e["id"]: e["score"] for e in t["best"]}
            won = sum(1 for i, v in seeds[o].items() if best.get(i, v) > v)
            lost = sum(1 for i, v in seeds[o].items() if best.get(i, v) < v)
            lines.append(f"- {o}: best against seed on the same test examples: {won} better, {lost} worse")
    return lines


def _reason(verdict: str) -> str:
    if verdict.startswith("rejected: minibatch"):
        return "rejected: not better than its parent on the minibatch"
    if verdict.startswith("rejected: invalid edit:"):
        return "rejected before any rollout: invalid graph edit"
    return verdict


def proposal_lines(out: Path) -> list[str]:
    """What each search proposed and why it was kept or not, from its proposal log."""
    lines = ["", "## Proposals, from each run's proposals.jsonl", ""]
    for opt in OPTIMIZERS:
        log = out / opt / "proposals.jsonl"
        if not log.is_file():
            continue
        props = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        counts: dict[str, int] = {}
        for prop in props:
            key = _reason(str(prop.get("verdict", "")))
            counts[key] = counts.get(key, 0) + 1
        lines.append(f"- {opt}: {len(props)} entries: " + "; ".join(f"{n} {k}" for k, n in counts.items()))
        for prop in props:
            if prop.get("verdict") == "accepted":
                new = [ln[1:].strip() for ln in str(prop.get("diff", "")).splitlines()
                       if ln.startswith("+") and not ln.startswith("+++")]
                lines.append(f"  - accepted #{prop.get('index')} ({prop.get('step')} {prop.get('move')} of "
                             f"{prop.get('module')}): minibatch {prop.get('parent_scores')} -> "
                             f"{prop.get('child_scores')}, val {prop.get('val_score')}: {' '.join(new)[:300]}")
    return lines if len(lines) > 3 else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--out", default="runs/local-maestro")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    os.environ.setdefault("TRIFORGE_LOCAL_TOOLS", "text")
    if hasattr(os, "nice"):
        os.nice(max(0, 19 - os.nice(0)))
    for opt in OPTIMIZERS:
        if not args.report_only and run(opt, out, args.budget) != 0:
            print(f"{opt} stopped (see above); run the script again to resume", file=sys.stderr)
            break
        table(out, args.budget)


if __name__ == "__main__":
    main()
