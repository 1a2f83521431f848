"""Does the local model stop repeating itself if the context is changed? Replayed on recorded dead ends.

    .venv/bin/python benchmarks/local_model/repeat_replay.py [--runs runs/local-cpagent/check] [--limit 12]
        [--variants as_run hint_last forget] [--cell-timeout 30] [--out benchmarks/results]

In the 101-problem measurement the 1.5B model sent, on dozens of problems, the same code again right after
the harness had said "[Same code as run K, same result: running it again changes nothing ...]", and a
re-ask at temperature 0.8 mostly came back identical. This takes every such point from recorded `check`
trajectories (the context the model saw just before a repeat that followed the flag) and asks the model
once per variant of that context, at temperature 0 with the measurement's settings (768 tokens, the text
protocol's stop markers):
- as_run: the context unchanged (shows whether the replay reproduces the recorded repeat);
- hint_last: the flag moved from the top of the last tool result to its end, after the error, with the
  error's last line repeated there (what the model reads last is the instruction);
- forget: every earlier exchange that sent this code is taken out of the context and replaced by one note
  naming the result it gave (the model cannot copy code it no longer sees; the kernel keeps its variables).
Each reply is classed as `same` (the same code again), `format_error` (no readable call) or `new` (other
code); new python_exec code is then run in a kernel that first re-ran the context's earlier cells, and
whether it ran without an error is recorded. Needs the installed local model; about 40 s per request on
2 cores, plus the cells.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

from smoke import machine, write_dated

from triforge.core.adapter import RESULT_TAG
from triforge.core.errors import FormatError
from triforge.core.llm import Completion
from triforge.core.small_model_policy import OUTPUT_BLOCK, forget_note
from triforge.core.tools import ToolSet, tool
from triforge.local.install import installed_model
from triforge.local.server import LocalServer, ServerOptions

FLAG = re.compile(r"^\[Same code as run \d+, same result:[^\n]*\]\n", re.M)
VARIANTS = ("as_run", "hint_last", "forget")


@tool
def python_exec(code: str) -> str:
    """Run Python code in your persistent IPython kernel and see what it prints.

    Args:
        code: Python source; variables and imports persist between calls
    """
    return ""


@tool
def explain_infeasible() -> str:
    """Explain why your current CPMpy model (the variable `model`) has no solution."""
    return ""


@tool
def prove_optimal() -> str:
    """Check that your optimisation model is solved to a proven optimum."""
    return ""


@tool
def submit(code: str) -> str:
    """Hand in your final, complete program.

    Args:
        code: the whole self-contained Python program
    """
    return ""


TOOLS = ToolSet([python_exec, explain_infeasible, prove_optimal, submit], code_tool="python_exec")


def code_of(text: str) -> str | None:
    """The code a reply runs or submits ("" for a call without code), or None when no call can be read."""
    try:
        calls = TOOLS.parse(Completion(content=text), native=False)
    except FormatError:
        return None
    return "\n".join(str(c.arguments.get("code", "")).strip() for c in calls)


def dead_ends(runs: Path) -> list[dict[str, Any]]:
    """Each trajectory's first reply that sent earlier code again right after the repeat flag."""
    out = []
    for traj in sorted(runs.glob("*/cpagent.trajectory.json")):
        msgs = [{"role": m["role"], "content": m.get("content") or ""} for m in json.loads(traj.read_text())["messages"]]
        sent: list[str | None] = []
        for i, m in enumerate(msgs):
            if m["role"] != "assistant":
                continue
            code = code_of(m["content"])
            if code and code in sent and FLAG.search(msgs[i - 1]["content"]):
                out.append({"problem": traj.parent.name, "context": msgs[:i], "code": code,
                            "recorded": m["content"]})
                break
            sent.append(code)
    return out


def _tail(result: str) -> str:
    body = result.replace("</tool_response>", "").strip().splitlines()
    return body[-1][:300] if body else "(no output)"


def hint_last(context: list[dict[str, Any]], code: str) -> list[dict[str, Any]]:
    last = context[-1]["content"]
    flag = FLAG.search(last)
    assert flag is not None
    body = last[:flag.start()] + last[flag.end():]
    note = (f"{flag.group(0).strip()} It ended with: {_tail(body)}\nDo not send this code again: write "
            "different code that fixes that.")
    if body.rstrip().endswith("</tool_response>"):
        body = body.rstrip()[: -len("</tool_response>")].rstrip() + "\n" + note + "\n</tool_response>"
    else:
        body = body.rstrip() + "\n" + note
    return [*context[:-1], {"role": context[-1]["role"], "content": body}]


def forget(context: list[dict[str, Any]], code: str) -> list[dict[str, Any]]:
    """The context cpagent builds with `forget_repeats` when the model sends this code a third time.

    The 2026-12-04 replay used the note of that day, which quoted the call's last result; since issue 17 the
    note says only that the call was not run (an earlier result can be stale), so a re-run measures that."""
    kept: list[dict[str, Any]] = []
    times = 0
    dropping = False
    for m in context:
        if m["role"] == "assistant":
            dropping = code_of(m["content"]) == code
            times += dropping
        if dropping:
            continue
        kept.append(m)
    return [*kept, {"role": "user", "content": forget_note(times + 1)}]


def build(variant: str, context: list[dict[str, Any]], code: str) -> list[dict[str, Any]]:
    if variant == "as_run":
        return context
    return {"hint_last": hint_last, "forget": forget}[variant](context, code)


def run_cells(earlier: list[str], new: str, timeout: float) -> dict[str, Any]:
    """Run the context's earlier cells, then the new one: did the new one raise?"""
    from triforge.cpagent.small_model_aids import PRELOAD_IMPORTS
    from triforge.sandbox.kernel_sandbox import KernelSandbox

    with KernelSandbox(timeout=timeout) as sb:
        sb.execute(PRELOAD_IMPORTS, timeout=timeout)
        for c in earlier:
            sb.execute(c, timeout=timeout)
        r = sb.execute(new, timeout=timeout)
    return {"ran_ok": r.ok, "error": None if r.error is None else r.error.name,
            "stdout_tail": (r.stdout or "")[-200:]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", default="runs/local-cpagent/check")
    ap.add_argument("--limit", type=int, default=12, help="dead ends to replay (in problem order)")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--cell-timeout", type=float, default=30.0)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results"))
    args = ap.parse_args()
    model = installed_model()
    if model is None:
        raise SystemExit("repeat_replay: the local model is not installed; run `triforge local install`")
    points = dead_ends(Path(args.runs))[: args.limit]
    if not points:
        raise SystemExit(f"repeat_replay: no repeat after the flag in the trajectories under {args.runs}")
    import openai

    settings = ServerOptions(model_path=model)
    rows = []
    t_start = time.monotonic()
    with LocalServer(settings) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="local", timeout=900)
        for p in points:
            earlier = [c for c in (code_of(m["content"]) for m in p["context"] if m["role"] == "assistant") if c]
            for variant in args.variants:
                t0 = time.perf_counter()
                r = client.chat.completions.create(model=settings.model_alias, temperature=0, max_tokens=768,
                                                   messages=build(variant, p["context"], p["code"]),
                                                   stop=[RESULT_TAG, OUTPUT_BLOCK])
                text = r.choices[0].message.content or ""
                code = code_of(text)
                outcome = "format_error" if code is None else "same" if code == p["code"] else "new"
                row: dict[str, Any] = {"problem": p["problem"], "variant": variant, "outcome": outcome,
                                       "seconds": round(time.perf_counter() - t0, 1),
                                       "finish_reason": r.choices[0].finish_reason, "reply": text}
                if outcome == "new" and code:
                    row.update(run_cells(earlier, code, args.cell_timeout))
                rows.append(row)
                print(f"{p['problem']} {variant}: {outcome}"
                      + (f" ({'ran ok' if row['ran_ok'] else row['error']})" if "ran_ok" in row else ""), flush=True)
    summary = {}
    for v in args.variants:
        mine = [r for r in rows if r["variant"] == v]
        summary[v] = {**Counter(r["outcome"] for r in mine),
                      "new_and_ran_ok": sum(bool(r.get("ran_ok")) for r in mine), "of": len(mine)}
    rep = {"date": date.today().isoformat(), "machine": machine(), "model": model.name,
           "settings": {"temperature": 0, "max_tokens": 768, "cell_timeout_s": args.cell_timeout},
           "points": len(points), "wall_s": round(time.monotonic() - t_start), "summary": summary, "rows": rows}
    write_dated(args.out, "local-model-repeat-replay", rep, summary)


if __name__ == "__main__":
    main()
