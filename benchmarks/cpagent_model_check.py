"""The model-level check on every reference, graded as a submission: each must pass its own check; and its cost.

Each problem's reference model (instance 0) is written to a file and graded as a submitted program twice, once
with `model_check="off"` (today's grading: the printed solution only) and once with the mode asked for
(default `sample`), side by side, so the ratio of the two grading times is measured under the same load.
Reference results are computed first (cached in a folder of this run), so neither side pays for them.

    nice -n 19 .venv/bin/python benchmarks/cpagent_model_check.py [--data NAME_OR_PATH] [--problem ID ...]
        [--mode sample|full] [--corpus] [--out benchmarks/results/cpagent-model-check-DATE]

`--corpus` runs the team's own corpus (tests/cpagent/corpus, references written in the styles LLM systems
write) instead of CP-Bench. `--replies FILE` grades instead the Python code blocks of the model replies a
benchmark recorded (rows with `problem` and `reply`, as in local-model-repeat-replay-*.json): how many are
accepted on their printed solution, and how many of those have an unsound model. Writes OUT.json and OUT.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from triforge.cpagent.dataset import load_dataset
from triforge.cpagent.grader import grade_program
from triforge.cpagent.refs import RefCache, run_references

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "cpagent" / "corpus"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None, help="data set name or path (default: the bundled CP-Bench set)")
    ap.add_argument("--problem", action="append", default=None)
    ap.add_argument("--mode", default="sample", choices=("sample", "full"))
    ap.add_argument("--corpus", action="store_true", help="the team's corpus instead of CP-Bench")
    ap.add_argument("--out", default=f"benchmarks/results/cpagent-model-check-{time.strftime('%Y-%m-%d')}")
    ap.add_argument("--replies", default=None, help="grade the code blocks of recorded model replies")
    args = ap.parse_args()
    if args.replies:
        return _replies(args)
    problems = load_dataset(CORPUS if args.corpus else args.data, args.problem)
    problems = [replace(p, instances=p.instances[:1]) for p in problems]
    cache = RefCache(Path(tempfile.mkdtemp(prefix="model-check-refs-")))
    t0 = time.perf_counter()
    refs = {r.problem_id: r for r in run_references(problems, jobs=1, cache=cache)}
    refs_s = time.perf_counter() - t0
    rows = []
    for i, p in enumerate(problems):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d, f"{p.id}.py")
            path.write_text(p.reference_source, encoding="utf-8")
            t1 = time.perf_counter()
            (off,) = grade_program(p, path, [0], cache=cache, model_check="off")
            off_s = time.perf_counter() - t1
            t2 = time.perf_counter()
            (on,) = grade_program(p, path, [0], cache=cache, model_check=args.mode)
            on_s = time.perf_counter() - t2
        mc = on.model_check or {}
        row = {"problem": p.id, "optimisation": p.is_optimization, "reference_ok": refs[p.id].ok,
               "off": off.verdict, "on": on.verdict, "off_s": round(off_s, 3), "on_s": round(on_s, 3),
               "soundness": mc.get("soundness", "-"), "coverage": mc.get("coverage", "-"),
               "completeness": mc.get("completeness", "-"), "completeness_note": mc.get("completeness_note", ""),
               "check_s": round(mc.get("seconds", 0.0), 3), "reasons": on.reasons[:2]}
        rows.append(row)
        print(f"[{i + 1}/{len(problems)}] {p.id}: off {off.verdict} {off_s:.2f} s, on {on.verdict} {on_s:.2f} s, "
              f"{row['soundness']} ({row['coverage']}); {row['completeness']}", flush=True)
    summary = _summary(rows, args.mode, refs_s)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": {"host": platform.node(), "cores": os.cpu_count(),
            "python": platform.python_version(), "load_avg_1m_end": os.getloadavg()[0]},
            "set": "corpus" if args.corpus else (args.data or "dcp-bench-open (bundled default)"),
            "mode": args.mode, "summary": summary, "rows": rows}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    out.with_suffix(".md").write_text(_md(meta), encoding="utf-8")
    print(json.dumps(summary, indent=1))


def _replies(args: argparse.Namespace) -> None:
    """Grade each distinct code block of recorded replies (instance 0, the check off and on)."""
    import re

    data = json.loads(Path(args.replies).read_text(encoding="utf-8"))
    blocks: dict[tuple[str, str], None] = {}
    for row in data.get("rows", []):
        for code in re.findall(r"```(?:python)?\n(.*?)```", row.get("reply") or "", flags=re.S):
            if "cpmpy" in code and "print" in code:
                blocks[(row["problem"], code)] = None
    problems = {p.id: p for p in load_dataset(args.data, sorted({pid for pid, _ in blocks}))}
    cache = RefCache(Path(tempfile.mkdtemp(prefix="model-check-refs-")))
    rows = []
    for pid, code in blocks:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d, "reply.py")
            path.write_text(code, encoding="utf-8")
            (v,) = grade_program(problems[pid], path, [0], cache=cache, model_check=args.mode)
        mc = v.model_check or {}
        rows.append({"problem": pid, "verdict": v.verdict, "soundness": mc.get("soundness", "-"),
                     "coverage": mc.get("coverage", "-"), "reasons": v.reasons[:1]})
        print(f"{pid}: {v.verdict} {rows[-1]['soundness']} {(v.reasons or [''])[0][:100]}", flush=True)
    accepted = [r for r in rows if r["verdict"] == "correct" or r["soundness"] == "unsound"]
    summary = {"programs": len(rows), "accepted_on_printed_solution": len(accepted),
               "unsound_among_accepted": sum(r["soundness"] == "unsound" for r in accepted),
               "verdicts": {k: sum(r["verdict"] == k for r in rows) for k in sorted({r["verdict"] for r in rows})}}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "source": args.replies,
                                                    "mode": args.mode, "summary": summary, "rows": rows}, indent=1))
    print(json.dumps(summary, indent=1))


def _summary(rows: list[dict], mode: str, refs_s: float) -> dict:
    off = sum(r["off_s"] for r in rows)
    on = sum(r["on_s"] for r in rows)
    return {
        "problems": len(rows), "mode": mode, "reference_runs_s": round(refs_s, 1),
        "graded_correct_off": sum(r["off"] == "correct" for r in rows),
        "graded_correct_on": sum(r["on"] == "correct" for r in rows),
        "soundness": {k: sum(r["soundness"] == k for r in rows) for k in ("sound", "unsound", "not_checked", "-")},
        "completeness": {k: sum(r["completeness"] == k for r in rows)
                         for k in ("keeps_reference", "over-constrained", "not_checked", "-")},
        "printed_right_model_wrong": sum(r["off"] == "correct" and r["soundness"] == "unsound" for r in rows),
        "grading_s_off": round(off, 1), "grading_s_on": round(on, 1), "ratio": round(on / off, 2) if off else None,
        "check_s_p50": round(statistics.median([r["check_s"] for r in rows if r["check_s"]] or [0.0]), 3),
        "check_s_max": round(max([r["check_s"] for r in rows] or [0.0]), 3),
    }


def _md(meta: dict) -> str:
    s = meta["summary"]
    lines = [f"# Model-level check on the references ({meta['set']}, mode `{meta['mode']}`, {meta['date']})", "",
             f"Machine: {meta['machine']}. Each reference graded as a submission (instance 0), check off and on.", "",
             f"- problems: {s['problems']}; correct with the check off: {s['graded_correct_off']}, on: "
             f"{s['graded_correct_on']}", f"- soundness: {s['soundness']}", f"- completeness: {s['completeness']}",
             f"- printed right but model wrong: {s['printed_right_model_wrong']}",
             f"- grading time: off {s['grading_s_off']} s, on {s['grading_s_on']} s (x{s['ratio']}); check p50 "
             f"{s['check_s_p50']} s, max {s['check_s_max']} s; reference runs first: {s['reference_runs_s']} s", "",
             "| problem | off | on | soundness | coverage | completeness | off s | on s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in meta["rows"]:
        lines.append(f"| {r['problem']} | {r['off']} | {r['on']} | {r['soundness']} | {r['coverage'][:90]} | "
                     f"{r['completeness']} | {r['off_s']} | {r['on_s']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
