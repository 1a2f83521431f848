"""Does forgetting a repeated call change what the local model solves? The measurement's check arm, re-run with it.

    .venv/bin/python benchmarks/local_model/forget_ab.py --data ../shared/data/dcp-bench-open \
        [--problem ID ...] [--from-runs runs/local-cpagent/check --limit 20] [--out runs/local-forget] \
        [--cache runs/local-cpagent/responses.sqlite]

repeat_replay.py showed that at the recorded dead ends (the model sending a cell again right after the harness
flagged it as a repeat) the 1.5B model writes new code once the repeated exchanges leave its context. This runs
whole problems end to end with exactly the settings of the committed 101-problem measurement's `check` arm plus
`forget_repeats`, and sets each beside that arm's recorded row (newest committed
`local-model-cpagent-*.json` with the same settings). Problems: those given with --problem, else the first
--limit problems whose recorded check-arm trajectory (under --from-runs) holds such a dead end.

Temperature 0 and a response cache: when --cache names the measurement's cache it is copied and read first,
so each run's prefix up to the third send (identical to the recorded run's) is read back instead of
regenerated, and `model wall s` counts only replies generated here. Every reply is the real model's.
Writes benchmarks/results/local-model-forget-ab-DATE.{json,md}.
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

from cpagent_local import RESULTS, harness_notes
from repeat_replay import dead_ends
from smoke import machine

from triforge.core import context
from triforge.core.cache import open_cache
from triforge.core.llm import get_llm
from triforge.core.react import AgentLimits
from triforge.cpagent.agent import PRELOAD_IMPORTS, CPAgentConfig
from triforge.cpagent.dataset import load_dataset
from triforge.cpagent.solve import solve_task
from triforge.cpagent.task import task_from_problem
from triforge.local.install import installed_model

SETTINGS = {"max_steps": 6, "max_wall_s": 900.0, "max_tokens_per_reply": 768, "auto_submit": True,
            "resample_repeats": 1, "preload_imports": True, "length_hint": False, "cell_hints": False}


def recorded_check_rows() -> tuple[str, dict[str, dict[str, Any]]]:
    """The check arm's rows of the newest committed measurement made with SETTINGS."""
    for f in sorted(RESULTS.glob("local-model-cpagent-*.json"), reverse=True):
        payload = json.loads(f.read_text())
        if all(payload.get(k) == v for k, v in SETTINGS.items()):
            return f.name, {r["problem"]: r["check"] for r in payload.get("rows", []) if "check" in r}
    raise SystemExit("forget_ab: no committed local-model-cpagent-*.json made with the measurement's settings")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--problem", action="append", default=None)
    ap.add_argument("--from-runs", default="runs/local-cpagent/check")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--out", default="runs/local-forget")
    ap.add_argument("--cache", default="runs/local-cpagent/responses.sqlite",
                    help="the measurement's response cache, copied and read first (skipped when absent)")
    args = ap.parse_args()
    os.environ.setdefault("TRIFORGE_LOCAL_TOOLS", "text")
    model = installed_model()
    if model is None:
        raise SystemExit("forget_ab: the local model is not installed: run `triforge local install`")
    source, recorded = recorded_check_rows()
    ids = args.problem or [p["problem"] for p in dead_ends(Path(args.from_runs))][: args.limit]
    if not ids:
        raise SystemExit(f"forget_ab: no problems: give --problem, or --from-runs with recorded dead ends "
                         f"(none under {args.from_runs})")
    problems = {p.id: p for p in load_dataset(args.data)}
    missing = [i for i in ids if i not in problems or i not in recorded]
    if missing:
        raise SystemExit(f"forget_ab: not in the dataset or the recorded rows: {', '.join(missing)}")
    out = Path(args.out)
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
                cfg = CPAgentConfig(limits=AgentLimits(max_steps=SETTINGS["max_steps"],
                                                       max_wall_s=SETTINGS["max_wall_s"]),
                                    fresh_check=True, auto_submit=True, temperature=0.0,
                                    resample_repeats=SETTINGS["resample_repeats"], forget_repeats=True,
                                    explain_length_cut=False, cell_hints=False, kernel_preamble=PRELOAD_IMPORTS)
                rec = solve_task(task_from_problem(problems[pid]), llm, out / pid, config=cfg)
                before = recorded[pid]
                rows.append({"problem": pid, "recorded": {k: before.get(k) for k in ("grade", "status", "steps")},
                             "forget": {"grade": rec["grade"]["status"], "reasons": rec["grade"].get("reasons", [])[:2],
                                        "status": rec["status"], "steps": rec["steps"],
                                        "forgotten": rec.get("forgotten", 0), "wall_s": rec["wall_s"],
                                        "format_errors": rec["format_errors"], **harness_notes(out / pid)}})
                print(f"[{i + 1}/{len(ids)}] {pid}: {before.get('grade')} -> {rec['grade']['status']} "
                      f"({rec['status']}, {rec['steps']} steps, forgotten {rec.get('forgotten', 0)}, "
                      f"{rec['wall_s']:.0f} s)", flush=True)
    finally:
        if cache is not None:
            cache.close()
        llm.close()
    summary = {arm: dict(Counter(r[arm]["grade"] for r in rows)) for arm in ("recorded", "forget")}
    summary["forget_submitted"] = sum(r["forget"]["status"] == "submitted" for r in rows)
    summary["recorded_submitted"] = sum(r["recorded"]["status"] == "submitted" for r in rows)
    summary["problems_with_a_forget"] = sum(r["forget"]["forgotten"] > 0 for r in rows)
    rep = {"date": date.today().isoformat(), "model": model.name, "compared_with": source, "settings": SETTINGS,
           "forget_repeats": True, "started": started, "summary": summary, "rows": rows}
    day = date.today().isoformat()
    (RESULTS / f"local-model-forget-ab-{day}.json").write_text(json.dumps(rep, indent=1))
    md = [f"# Forgetting repeated calls, end to end, with the local model ({day})", "",
          f"- model: `{model.name}`; settings of the measurement's check arm ({source}) plus `forget_repeats`",
          f"- machine at start: {started['machine']['cpu']}, {started['machine']['cores_usable']} cores, "
          f"load {started['machine']['load_avg_1m']:.1f}; started {started['time']}",
          f"- problems: {len(rows)}; submitted: recorded {summary['recorded_submitted']}, with forget "
          f"{summary['forget_submitted']}; grades recorded {summary['recorded']}, with forget {summary['forget']}",
          "- wall s counts only the replies generated here (the prefix shared with the recorded run is read back)",
          "", "| problem | recorded grade | steps | with forget: grade | status | steps | forgotten | wall s | reason |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a, b = r["recorded"], r["forget"]
        reason = (b["reasons"] or [""])[0][:80].replace("|", "/")
        md.append(f"| {r['problem']} | {a['grade']} | {a['steps']} | {b['grade']} | {b['status']} | {b['steps']} | "
                  f"{b['forgotten']} | {b['wall_s']} | {reason} |")
    path = RESULTS / f"local-model-forget-ab-{day}.md"
    path.write_text("\n".join(md) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
