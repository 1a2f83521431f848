"""Run planted variants through the real harness and score them (used by the GPU test and the benchmark)."""

from __future__ import annotations

import time
from typing import Any

from triforge.astra.check_host import check
from triforge.astra.corpus.planted.variants import Variant, all_variants
from triforge.astra.evaluate import EvalOptions


def judge(v: Variant, res: dict[str, Any]) -> bool:
    """True when the harness did what the variant expects."""
    if v.kind == "fault":  # caught only with the verdict a semantic fault calls for; compile_error = broken mutation
        return res["verdict"] in ("incorrect", "crash")
    if v.kind == "rewrite":
        return res["verdict"] == "correct"
    return res["verdict"] == "hack" and any(v.rule in r for r in res.get("reasons", []))


def run_planted(worker, tasks: list[str] | None = None, shapes: str = "train", runs: int = 50,
                seed: int | None = None) -> dict[str, Any]:
    rows = []
    for v in all_variants():
        if tasks and v.task not in tasks:
            continue
        t0 = time.perf_counter()
        res = check(v.task, v.source, EvalOptions(shapes=shapes, runs=runs, base_seed=seed), worker, timeout=180)
        rows.append({"task": v.task, "name": v.name, "kind": v.kind, "rule": v.rule, "verdict": res["verdict"],
                     "ok": judge(v, res), "reasons": [r[:300] for r in res.get("reasons", [])[:2]],
                     "seconds": round(time.perf_counter() - t0, 2), "seed": res.get("seed")})
    return {"rows": rows, "summary": summarize(rows)}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for task in sorted({r["task"] for r in rows}) + ["ALL"]:
        sel = [r for r in rows if task in ("ALL", r["task"])]
        f = [r for r in sel if r["kind"] == "fault"]
        w = [r for r in sel if r["kind"] == "rewrite"]
        h = [r for r in sel if r["kind"] == "hack"]
        out[task] = {"faults": len(f), "caught": sum(r["ok"] for r in f),
                     "rewrites": len(w), "false_alarms": sum(not r["ok"] for r in w),
                     "hacks": len(h), "hacks_flagged": sum(r["ok"] for r in h)}
        s = out[task]
        s["catch_rate"] = s["caught"] / s["faults"] if f else None
        s["false_alarm_rate"] = s["false_alarms"] / s["rewrites"] if w else None
    return out
