"""Does forgetting a repeated call change what the local model solves? The measurement's check arm, re-run with it.

    .venv/bin/python benchmarks/local_model/forget_ab.py --data dcp-bench-open \
        [--problem ID ...] [--from-runs runs/local-cpagent/check --limit 20] [--max-steps 6] \
        [--out runs/local-forget] [--cache runs/local-cpagent/responses.sqlite]

repeat_replay.py showed that at the recorded dead ends (the model sending a cell again right after the harness
flagged it as a repeat) the 1.5B model writes new code once the repeated exchanges leave its context. This runs
whole problems end to end with exactly the settings of the committed 101-problem measurement's `check` arm plus
`forget_repeats`, and sets each beside that arm's recorded row (newest committed
`local-model-cpagent-*.json` with the same settings). With --max-steps other than the measurement's 6 there
is no recorded row to compare with, so the check arm is also run here without `forget_repeats` (`keep`).
Problems: those given with --problem, else the first --limit problems whose recorded check-arm trajectory
(under --from-runs) holds such a dead end.

Temperature 0 and a response cache: when --cache names the measurement's cache it is copied and read first,
so each run's prefix up to the third send (identical to the recorded run's) is read back instead of
regenerated: `wall s` (the run's wall time) holds only the replies generated here, and the kernel's time.
Every reply is the real model's. Writes benchmarks/results/local-model-forget-ab-DATE[-Nsteps].{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

from cpagent_local import RESULTS, arm_config, committed_rows, harness_notes
from repeat_replay import dead_ends
from smoke import machine

from triforge.core import context
from triforge.core.cache import open_cache
from triforge.core.llm import get_llm
from triforge.cpagent.dataset import load_dataset
from triforge.cpagent.solve import solve_task
from triforge.cpagent.task import task_from_problem
from triforge.local.install import DEFAULT_MODEL, installed_model

# the committed 101-problem measurement's settings (cpagent_local.py's defaults)
SETTINGS = {"max_steps": 6, "max_wall_s": 900.0, "max_tokens_per_reply": 768, "auto_submit": True,
            "resample_repeats": 1, "preload_imports": True, "length_hint": False, "cell_hints": False,
            "forget_repeats": False, "model_sha256": DEFAULT_MODEL.sha256}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--problem", action="append", default=None)
    ap.add_argument("--from-runs", default="runs/local-cpagent/check")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--max-steps", type=int, default=SETTINGS["max_steps"],
                    help="steps per problem; other than 6, a `keep` arm (forget off) is run beside it")
    ap.add_argument("--out", default="runs/local-forget")
    ap.add_argument("--cache", default="runs/local-cpagent/responses.sqlite",
                    help="the measurement's response cache, copied and read first (skipped when absent)")
    args = ap.parse_args()
    os.environ.setdefault("TRIFORGE_LOCAL_TOOLS", "text")
    model = installed_model()
    if model is None:
        raise SystemExit("forget_ab: the local model is not installed: run `triforge local install`")
    source, rows_before = committed_rows(SETTINGS)
    if not source:
        raise SystemExit("forget_ab: no committed local-model-cpagent-*.json made with the measurement's settings")
    recorded = {pid: r["check"] for pid, r in rows_before.items()}
    steps = args.max_steps
    arms = {"forget": True} if steps == SETTINGS["max_steps"] else {"keep": False, "forget": True}
    ids = args.problem or [p["problem"] for p in dead_ends(Path(args.from_runs))][: args.limit]
    if not ids:
        raise SystemExit(f"forget_ab: no problems: give --problem, or --from-runs with recorded dead ends "
                         f"(none under {args.from_runs})")
    problems = {p.id: p for p in load_dataset(args.data)}
    missing = [i for i in ids if i not in problems or i not in recorded]
    if missing:
        raise SystemExit(f"forget_ab: not in the dataset or the recorded rows: {', '.join(missing)}")
    out = Path(args.out) if steps == SETTINGS["max_steps"] else Path(f"{args.out}-{steps}steps")
    out.mkdir(parents=True, exist_ok=True)
    cache_path = out / "responses.sqlite"
    if not cache_path.exists() and Path(args.cache).is_file():
        shutil.copyfile(args.cache, cache_path)
    started = {"machine": machine(), "time": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    cache = open_cache("rw", cache_path)
    llm = get_llm("local")
    rows = []
    try:
        with context.use(cache=cache):
            for i, pid in enumerate(ids):
                row: dict[str, Any] = {"problem": pid}
                if "keep" not in arms:
                    row["recorded"] = {k: recorded[pid].get(k) for k in ("grade", "status", "steps")}
                for arm, forget in arms.items():
                    cfg = arm_config({**SETTINGS, "max_steps": steps, "forget_repeats": forget}, check=True)
                    run_dir = out / pid if len(arms) == 1 else out / arm / pid
                    rec = solve_task(task_from_problem(problems[pid]), llm, run_dir, config=cfg)
                    row[arm] = {"grade": rec["grade"]["status"], "reasons": rec["grade"].get("reasons", [])[:2],
                                "status": rec["status"], "steps": rec["steps"], "forgotten": rec.get("forgotten", 0),
                                "wall_s": rec["wall_s"], "format_errors": rec["format_errors"],
                                **harness_notes(run_dir)}
                    print(f"[{i + 1}/{len(ids)}] {pid} {arm}: {rec['grade']['status']} ({rec['status']}, "
                          f"{rec['steps']} steps, forgotten {rec.get('forgotten', 0)}, {rec['wall_s']:.0f} s)",
                          flush=True)
                rows.append(row)
    finally:
        if cache is not None:
            cache.close()
        llm.close()
    base = "keep" if "keep" in arms else "recorded"
    summary: dict[str, Any] = {arm: dict(Counter(r[arm]["grade"] for r in rows)) for arm in (base, "forget")}
    for arm in (base, "forget"):
        summary[f"{arm}_submitted"] = sum(r[arm]["status"] == "submitted" for r in rows)
    summary["problems_with_a_forget"] = sum(r["forget"]["forgotten"] > 0 for r in rows)
    day = date.today().isoformat()
    stem = f"local-model-forget-ab-{day}" + ("" if base == "recorded" else f"-{steps}steps")
    rep = {"date": day, "model": model.name, "compared_with": source if base == "recorded" else "keep arm run here",
           "settings": {**SETTINGS, "max_steps": steps}, "started": started, "summary": summary, "rows": rows}
    (RESULTS / f"{stem}.json").write_text(json.dumps(rep, indent=1))
    what = (f"the measurement's check arm ({source})" if base == "recorded" else
            f"the measurement's check arm with {steps} steps, run here without (`keep`) and with `forget_repeats`")
    md = [f"# Forgetting repeated calls, end to end, with the local model ({day})", "",
          f"- model: `{model.name}`; settings of {what}",
          f"- machine at start: {started['machine']['cpu']}, {started['machine']['cores_usable']} cores, "
          f"load {started['machine']['load_avg_1m']:.1f}; started {started['time']}",
          f"- problems: {len(rows)}; submitted: {base} {summary[f'{base}_submitted']}, with forget "
          f"{summary['forget_submitted']}; grades {base} {summary[base]}, with forget {summary['forget']}",
          "- wall s: the run's wall time (replies already in the response cache are read back, not generated)",
          "", f"| problem | {base}: grade | steps | with forget: grade | status | steps | forgotten | wall s | reason |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a, b = r[base], r["forget"]
        reason = (b["reasons"] or [""])[0][:80].replace("|", "/")
        md.append(f"| {r['problem']} | {a['grade']} | {a['steps']} | {b['grade']} | {b['status']} | {b['steps']} | "
                  f"{b['forgotten']} | {b['wall_s']} | {reason} |")
    path = RESULTS / f"{stem}.md"
    path.write_text("\n".join(md) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
