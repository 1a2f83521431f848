"""cpagent with the real local model on CP-Bench problems, with and without the fresh-run check before submit.

Run (after `triforge local install`; not in CI, hours on 2 cores):
    .venv/bin/python benchmarks/local_model/cpagent_local.py --data dcp-bench-open \
        [--out runs/local-cpagent] [--max-steps 6] [--max-wall 900] [--no-auto-submit] [--resample-repeats 1] \
        [--no-preload] [--length-hint] [--cell-hints] [--forget-repeats] [--stop-after-min 90] [--report-only]

Problems run in sorted id order; for each, the `check` arm (fresh run before accepting a submission) and then
the `nocheck` arm (submission accepted as written). Both hand in a cell that prints exactly one
solution-shaped JSON object (auto-submit, unless `--no-auto-submit`; the 1.5B model printed solutions but never called submit in 13
problems without it), fresh-checked in the `check` arm; a reply repeating an earlier one is re-asked at
temperature 0.8 (at temperature 0 the model looped on one reply), and the kernel starts with json, cpmpy and
numpy imported (submissions must still import them: the fresh run has no preamble). Both use temperature 0 and one response cache, so the
`nocheck` arm replays the `check` arm's identical prefix instead of regenerating it; every reply is still the
real model's. Re-running resumes: finished problems are kept, both those in --out and those in the newest
committed benchmarks/results/local-model-cpagent-*.json made with the same settings (so a fresh clone goes on where the last session stopped;
--fresh ignores the committed rows). Writes benchmarks/results/local-model-cpagent-DATE.{json,md} with every
problem run so far (a partial run says so).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

from smoke import machine

from triforge.core import context
from triforge.core.cache import open_cache
from triforge.core.llm import get_llm
from triforge.core.react import AgentLimits
from triforge.cpagent.agent import CPAgentConfig
from triforge.cpagent.dataset import load_dataset
from triforge.cpagent.small_model_aids import PRELOAD_IMPORTS, SmallModelAids
from triforge.cpagent.solve import solve_task
from triforge.cpagent.task import task_from_problem
from triforge.local.install import DEFAULT_MODEL, installed_model

RESULTS = Path(__file__).resolve().parents[1] / "results"
ARMS = {"check": True, "nocheck": False}


def load_records(out: Path) -> dict[str, dict[str, dict[str, Any]]]:
    recs: dict[str, dict[str, dict[str, Any]]] = {}
    for arm in ARMS:
        for p in sorted((out / arm).glob("*/results.json")):
            r = json.loads(p.read_text())
            if r.get("grade"):
                recs.setdefault(r["problem"], {})[arm] = r
    return recs


def recovery(run_dir: Path) -> list[str]:
    """For each format error: what the model did next (a valid call, another error, or nothing: the run ended)."""
    traj = run_dir / "cpagent.trajectory.json"
    if not traj.is_file():
        return []
    data = json.loads(traj.read_text())
    msgs = data["messages"] if isinstance(data, dict) else data
    outcomes = []
    for i, m in enumerate(msgs):
        if m.get("role") == "user" and str(m.get("content", "")).startswith("Format error"):
            nxt = msgs[i + 2] if i + 2 < len(msgs) else None  # what followed the model's next reply
            if i + 1 >= len(msgs):
                outcomes.append("run ended (a limit)")
            elif nxt is None:
                outcomes.append("next reply ended the run")
            elif str(nxt.get("content", "")).startswith("Format error"):
                outcomes.append("another format error")
            else:
                outcomes.append("valid call next")
    return outcomes


def harness_notes(run_dir: Path) -> dict[str, int]:
    """How often the harness flagged a repeated cell and reminded the model to submit in one run."""
    traj = run_dir / "cpagent.trajectory.json"
    if not traj.is_file():
        return {"repeat_flags": 0, "submit_reminders": 0, "auto_submits_refused": 0}
    data = json.loads(traj.read_text())
    texts = [str(m.get("content", "")) for m in (data["messages"] if isinstance(data, dict) else data)
             if m.get("role") in ("user", "tool")]
    return {"repeat_flags": sum("[Same code as run" in t for t in texts),
            "submit_reminders": sum("exactly the required keys" in t for t in texts),
            "auto_submits_refused": sum("The harness tried to hand in this cell" in t for t in texts)}


def reask_outcomes(run_dir: Path) -> dict[str, int]:
    """Re-asked replies (temperature 0.8) in one run, and how many came back identical to the repeat."""
    trace = run_dir / "trace.jsonl"
    if not trace.is_file():
        return {"reasked": 0, "reasked_identical": 0, "cut_at_token_limit": 0}
    llm = [s for s in map(json.loads, trace.read_text().splitlines()) if s.get("kind") == "llm"]
    same = [llm[i - 1]["attributes"].get("gen_ai.output.messages") == s["attributes"].get("gen_ai.output.messages")
            for i, s in enumerate(llm) if i and s["attributes"].get("gen_ai.request.temperature") == 0.8]
    cut = sum(s["attributes"].get("gen_ai.response.finish_reasons") == ["length"] for s in llm)
    return {"reasked": len(same), "reasked_identical": sum(same), "cut_at_token_limit": cut}


def committed_rows(meta: dict[str, Any]) -> tuple[str, dict[str, dict[str, Any]]]:
    """Rows finished in both arms by earlier sessions with the same settings, and the newest such results file
    they come from ("" and no rows when there is none)."""
    same = ("max_steps", "max_wall_s", "max_tokens_per_reply", "auto_submit", "resample_repeats", "preload_imports",
            "length_hint", "cell_hints", "forget_repeats", "model_sha256")
    off = {"auto_submit": False, "resample_repeats": 0, "preload_imports": False,
           "length_hint": False, "cell_hints": False, "forget_repeats": False}  # before these settings existed
    for f in sorted(RESULTS.glob("local-model-cpagent-*.json"), reverse=True):
        payload = json.loads(f.read_text())
        if all(payload.get(k, off.get(k)) == meta.get(k, off.get(k)) for k in same):
            return f.name, {r["problem"]: r for r in payload.get("rows", []) if all(a in r for a in ARMS)}
    return "", {}


def arm_config(meta: dict[str, Any], check: bool) -> CPAgentConfig:
    """cpagent's settings for one arm of the measurement, every aid named. The recorded rows also had the repeat
    flag and the submit reminder, retired since (docs/local.md): rows run now have neither."""
    aids = SmallModelAids(auto_submit=meta["auto_submit"], resample_repeats=meta["resample_repeats"],
                          forget_repeats=meta.get("forget_repeats", False), explain_length_cut=meta["length_hint"])
    return CPAgentConfig(limits=AgentLimits(max_steps=meta["max_steps"], max_wall_s=meta["max_wall_s"]),
                         fresh_check=check, temperature=0.0, cell_hints=meta["cell_hints"], small_model=aids,
                         kernel_preamble=PRELOAD_IMPORTS if meta["preload_imports"] else "")


def write_report(out: Path, meta: dict[str, Any], n_total: int, earlier: dict[str, dict[str, Any]]) -> Path:
    recs = load_records(out)
    rows = [r for pid, r in earlier.items() if pid not in recs]
    for pid in sorted(recs):
        row: dict[str, Any] = {"problem": pid}
        for arm in ARMS:
            r = recs[pid].get(arm)
            if r is None:
                continue
            row[arm] = {
                "grade": r["grade"]["status"], "reasons": r["grade"].get("reasons", [])[:3], "status": r["status"],
                "message": r.get("message", ""), "steps": r["steps"], "input_tokens": r["input_tokens"],
                "output_tokens": r["output_tokens"], "wall_s": r["wall_s"], "format_errors": r["format_errors"],
                "fresh_checks_failed": r.get("fresh_checks_failed", 0), "auto_submitted": r.get("auto_submitted", False),
                "resampled": r.get("resampled", 0), "cut_replies": r.get("cut_replies", 0),
                "format_error_recovery": recovery(out / arm / pid), **harness_notes(out / arm / pid),
                **reask_outcomes(out / arm / pid),
            }
        rows.append(row)
    rows.sort(key=lambda r: r["problem"])
    both = [r for r in rows if all(a in r for a in ARMS)]
    summary = {}
    for arm in ARMS:
        rs = [r[arm] for r in rows if arm in r]
        summary[arm] = {
            "problems": len(rs), "correct": sum(r["grade"] == "correct" for r in rs),
            "submitted": sum(r["status"] == "submitted" for r in rs),
            "auto_submitted": sum(bool(r.get("auto_submitted")) for r in rs),
            "replies_resampled": sum(r.get("resampled", 0) for r in rs),
            "reasked_identical_again": sum(r.get("reasked_identical", 0) for r in rs),
            "replies_cut_at_invented_tool_response": sum(r.get("cut_replies", 0) for r in rs),
            "replies_cut_at_token_limit": sum(r.get("cut_at_token_limit", 0) for r in rs),
            "problems_with_a_reply_cut_at_token_limit": sum(r.get("cut_at_token_limit", 0) > 0 for r in rs),
            "grades": dict(Counter(r["grade"] for r in rs)), "agent_status": dict(Counter(r["status"] for r in rs)),
            "format_errors": sum(r["format_errors"] for r in rs),
            "format_error_recovery": dict(Counter(o for r in rs for o in r["format_error_recovery"])),
            "fresh_checks_failed": sum(r["fresh_checks_failed"] for r in rs),
            "problems_with_submit_reminder": sum(r["submit_reminders"] > 0 for r in rs),
            "problems_with_repeat_flag": sum(r["repeat_flags"] > 0 for r in rs),
            "auto_submits_refused_by_fresh_run": sum(r.get("auto_submits_refused", 0) for r in rs),
            "wall_s": round(sum(r["wall_s"] for r in rs), 1),
            "output_tokens": sum(r["output_tokens"] for r in rs),
        }
    day = date.today().isoformat()
    payload = {"date": day, **meta, "problems_in_set": n_total, "problems_done_both_arms": len(both),
               "summary": summary, "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"local-model-cpagent-{day}.json").write_text(json.dumps(payload, indent=1))
    md = [f"# cpagent with the real local model on CP-Bench ({day})", "",
          f"- model: `{meta['model_file']}` (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M), SHA-256 `{meta['model_sha256']}`",
          f"- served by llama-cpp-python in text tool mode (GGUF chat template, {meta['max_tokens_per_reply']} tokens "
          "per reply at most, python fences as code calls), temperature 0",
          f"- machine: {meta['machine']['cpu']}, {meta['machine']['cores_usable']} cores, load at start "
          f"{meta['machine']['load_avg_1m']:.1f}",
          f"- limits per problem: {meta['max_steps']} steps, {meta['max_wall_s']:g} s wall",
          f"- repeated replies re-asked at temperature 0.8: up to {meta.get('resample_repeats', 0)} times; "
          f"kernel preloaded with json, cpmpy as cp, numpy as np: {'yes' if meta.get('preload_imports') else 'no'}; "
          "a reply cut at the token limit is told so: " + ("yes" if meta.get("length_hint") else "no (the generic "
                                                           "format error; on in cpagent's small-model profile)")
          + "; cell hints (install commands not run, hints after common CPMpy errors): "
          + ("yes" if meta.get("cell_hints") else "no (cpagent's default since 2026-12-03 is yes)")
          + "; a call sent a third time is forgotten: "
          + ("yes" if meta.get("forget_repeats") else "no (on in cpagent's small-model profile)"),
          "- auto-submit: " + ("on (a cell printing exactly one solution-shaped JSON object is handed in; the `check` "
                               "arm runs it fresh first)" if meta.get("auto_submit") else "off (explicit submit only)"),
          f"- problems done (both arms): **{len(both)} of {n_total}**"
          + ("" if len(both) == n_total else " (partial: re-run the command to resume)"),
          "- the `nocheck` arm accepts the first submission as written; until then its trajectory is the `check` "
          "arm's, read back from the response cache (its wall time counts only the replies that had to be generated)",
          "- `format errors (recovery)`: replies with no readable tool call, and what the model's next reply was", "",
          "| arm | problems | submitted (auto) | correct | grades | agent status | format errors (recovery) "
          "| fresh checks failed | model wall s |", "|---|---|---|---|---|---|---|---|---|"]
    for arm, s in summary.items():
        md.append(f"| {arm} | {s['problems']} | {s['submitted']} ({s['auto_submitted']}) | {s['correct']} | "
                  f"{s['grades']} | {s['agent_status']} | "
                  f"{s['format_errors']} ({s['format_error_recovery']}) | {s['fresh_checks_failed']} | {s['wall_s']} |")
    md += ["", "Harness aids (check arm): a solution-shaped output brought a submit reminder on "
           f"{summary['check']['problems_with_submit_reminder']} problems; a repeated identical cell was flagged on "
           f"{summary['check']['problems_with_repeat_flag']}; an automatic hand-in failed its fresh run "
           f"{summary['check']['auto_submits_refused_by_fresh_run']} times (the model was told why); "
           f"{summary['check']['replies_resampled']} repeated replies were re-asked at temperature 0.8, and "
           f"{summary['check']['reasked_identical_again']} of those came back identical again (the model copies its "
           "earlier reply from the context, which stays near-certain at 0.8); "
           f"{summary['check']['replies_cut_at_invented_tool_response']} replies were cut where the model began "
           "writing a tool's answer itself; "
           f"{summary['check']['replies_cut_at_token_limit']} replies on "
           f"{summary['check']['problems_with_a_reply_cut_at_token_limit']} problems stopped at the "
           f"{meta['max_tokens_per_reply']}-token limit (" + ("told so" if meta.get("length_hint") else
                                                               "answered with the generic format error") + ").", ""]
    md += ["| problem | check: grade | steps | fmt err | wall s | nocheck: grade | steps | wall s | reason (check) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c, n = r.get("check", {}), r.get("nocheck", {})
        reason = (c.get("reasons") or [""])[0][:90].replace("|", "/")
        md.append(f"| {r['problem']} | {c.get('grade', '')} | {c.get('steps', '')} | {c.get('format_errors', '')} | "
                  f"{c.get('wall_s', '')} | {n.get('grade', '')} | {n.get('steps', '')} | {n.get('wall_s', '')} | "
                  f"{reason} |")
    path = RESULTS / f"local-model-cpagent-{day}.md"
    old = path.read_text() if path.is_file() else ""
    notes = old[k:] if (k := old.find("\n## Notes")) >= 0 else ""  # written by hand: kept across re-reports
    path.write_text("\n".join(md) + "\n" + notes)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", default="runs/local-cpagent")
    ap.add_argument("--max-steps", type=int, default=6)
    ap.add_argument("--max-wall", type=float, default=900.0)
    ap.add_argument("--no-auto-submit", action="store_true", help="only explicit submit calls hand in a program")
    ap.add_argument("--resample-repeats", type=int, default=1, help="re-ask a repeated reply at temperature 0.8")
    ap.add_argument("--no-preload", action="store_true", help="do not import json/cpmpy/numpy in the kernel first")
    ap.add_argument("--length-hint", action="store_true",
                    help="tell a reply cut at the token limit so (cpagent's small-model profile; off here because the "
                         "measurement begun on 2026-12-02 ran without it)")
    ap.add_argument("--cell-hints", action="store_true",
                    help="skip install commands and answer unknown `cp.X` names (cpagent's default; off here "
                         "for the same reason)")
    ap.add_argument("--forget-repeats", action="store_true",
                    help="forget a call sent a third time (in cpagent's small-model profile; off here for the same "
                         "reason; benchmarks/local_model/forget_ab.py measures it)")
    ap.add_argument("--stop-after-min", type=float, default=None, help="start no new problem after this long")
    ap.add_argument("--problem", action="append", default=None)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="ignore rows committed by earlier sessions")
    args = ap.parse_args()
    os.environ.setdefault("TRIFORGE_LOCAL_TOOLS", "text")
    out = Path(args.out)
    problems = [p for p in load_dataset(args.data) if not args.problem or p.id in args.problem]
    model = installed_model()
    if model is None:
        raise SystemExit("the local model is not installed: run `triforge local install`")
    meta = {"model_file": model.name, "model_sha256": DEFAULT_MODEL.sha256 if model.name == DEFAULT_MODEL.name
            else "(not the default model)", "machine": machine(), "max_steps": args.max_steps,
            "max_wall_s": args.max_wall, "max_tokens_per_reply": int(os.environ.get("TRIFORGE_LOCAL_MAX_TOKENS", "768")),
            "auto_submit": not args.no_auto_submit, "resample_repeats": args.resample_repeats,
            "preload_imports": not args.no_preload, "length_hint": args.length_hint, "cell_hints": args.cell_hints,
            "forget_repeats": args.forget_repeats}
    earlier = {} if args.fresh else committed_rows(meta)[1]
    started = out / "machine_at_start.json"  # the machine as the run found it, not as the report finds it
    if args.report_only and started.is_file():
        meta["machine"] = json.loads(started.read_text())
    if not args.report_only:
        out.mkdir(parents=True, exist_ok=True)
        started.write_text(json.dumps(meta["machine"]))
        t0 = time.monotonic()
        cache = open_cache("rw", out / "responses.sqlite")
        llm = get_llm("local")
        try:
            with context.use(cache=cache):
                for i, p in enumerate(problems):
                    if args.stop_after_min is not None and time.monotonic() - t0 > args.stop_after_min * 60:
                        print(f"stopping after {args.stop_after_min:g} min; re-run to resume", flush=True)
                        break
                    if p.id in earlier:
                        continue  # finished in an earlier session (committed results)
                    task = task_from_problem(p)
                    for arm, check in ARMS.items():
                        rec = solve_task(task, llm, out / arm / p.id, config=arm_config(meta, check))
                        print(f"[{i + 1}/{len(problems)}] {p.id} {arm}: {rec['grade']['status']} "
                              f"({rec['status']}, {rec['steps']} steps, {rec['wall_s']:.0f} s)", flush=True)
        finally:
            if cache is not None:
                cache.close()
            llm.close()
    print(write_report(out, meta, len(problems), earlier))


if __name__ == "__main__":
    main()
