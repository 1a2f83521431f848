"""How fast does the local model answer cpagent's own requests under different server settings, unchanged?

    .venv/bin/python benchmarks/local_model/decode_ab.py [--runs runs/local-cpagent/check] [--problems 4]
        [--turns 1] [--arms passive active spin3ms lookup2] [--load 0 2] [--out benchmarks/results]

Replays the first assistant turns of recorded cpagent trajectories (same messages, temperature 0, the text
protocol's stop markers, 768 tokens) against a llama.cpp server started once per arm:
- passive: OMP_WAIT_POLICY=PASSIVE (triforge's default before 2026-12-03: OpenMP threads sleep at once);
- active: OMP_WAIT_POLICY=ACTIVE (threads spin up to minutes, also between requests);
- spin3ms: GOMP_SPINCOUNT=300000 (libgomp's own default, about 3 ms of spinning, then sleep);
- lookupN: passive plus llama-cpp-python's prompt-lookup speculative decoding with N draft tokens.
`--load K` repeats every arm while K busy-loop processes compete for the cores (0 = a quiet machine).
Reports seconds and output tokens per request, and whether each reply is identical to the first arm's.
Needs the installed local model; minutes per arm on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time
from datetime import date
from pathlib import Path
from typing import Any

from smoke import machine, write_dated

from triforge.core.adapter import RESULT_TAG
from triforge.core.small_model_policy import OUTPUT_BLOCK
from triforge.local.install import installed_model
from triforge.local.server import LocalServer, ServerOptions

ARM_ENV = {"passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "active": {"OMP_WAIT_POLICY": "ACTIVE"},
           "spin3ms": {"GOMP_SPINCOUNT": "300000"}}


def requests_from(runs: Path, problems: int, turns: int) -> list[tuple[str, list[dict[str, Any]]]]:
    out = []
    for traj in sorted(runs.glob("*/cpagent.trajectory.json"))[:problems]:
        msgs = json.loads(traj.read_text())["messages"]
        k = 0
        for i, m in enumerate(msgs):
            if m["role"] == "assistant" and k < turns:
                out.append((f"{traj.parent.name}#{k}", [{"role": x["role"], "content": x.get("content") or ""}
                                                        for x in msgs[:i]]))
                k += 1
    return out


def _burn() -> None:
    while True:
        pass


def run_arm(model: Path, arm: str, reqs: list[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    import openai

    extra: list[str] = []
    env = ARM_ENV.get(arm, {"OMP_WAIT_POLICY": "PASSIVE"})
    if arm.startswith("lookup"):
        extra = ["--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", arm[len("lookup"):]]
    saved = {k: os.environ.pop(k, None) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    os.environ.update(env)  # server_env() keeps what is set
    settings = ServerOptions(model_path=model)
    rows = []
    try:
        with LocalServer(settings, command=lambda port: [*settings.argv(port), *extra]) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="local", timeout=900)
            for name, msgs in reqs:
                t0 = time.perf_counter()
                r = client.chat.completions.create(model=settings.model_alias, messages=msgs, temperature=0,
                                                   max_tokens=768, stop=[RESULT_TAG, OUTPUT_BLOCK])
                dt = time.perf_counter() - t0
                usage = r.usage
                rows.append({"request": name, "seconds": round(dt, 2),
                             "out_tokens": usage.completion_tokens if usage else None,
                             "prompt_tokens": usage.prompt_tokens if usage else None,
                             "text": r.choices[0].message.content or ""})
                print(f"  {name}: {dt:.1f} s, {rows[-1]['out_tokens']} tokens", flush=True)
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", default="runs/local-cpagent/check")
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--turns", type=int, default=1)
    ap.add_argument("--arms", nargs="+", default=["passive", "active", "spin3ms"])
    ap.add_argument("--load", type=int, nargs="+", default=[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results"))
    args = ap.parse_args()
    for arm in args.arms:
        if arm not in ARM_ENV and not (arm.startswith("lookup") and arm[6:].isdigit()):
            raise SystemExit(f"decode_ab: unknown arm {arm!r}; use {sorted(ARM_ENV)} or lookupN")
    model = installed_model()
    if model is None:
        raise SystemExit("decode_ab: the local model is not installed; run `triforge local install`")
    reqs = requests_from(Path(args.runs), args.problems, args.turns)
    if not reqs:
        raise SystemExit(f"decode_ab: no trajectories under {args.runs}")
    arms: dict[str, list[dict[str, Any]]] = {}
    for load in args.load:
        hogs = [mp.Process(target=_burn, daemon=True) for _ in range(load)]
        for h in hogs:
            h.start()
        try:
            for arm in args.arms:
                print(f"{arm}, {load} busy-loop process(es)", flush=True)
                arms[f"{arm}@load{load}"] = run_arm(model, arm, reqs)
        finally:
            for h in hogs:
                h.terminate()
    first = next(iter(arms.values()))
    summary = {}
    for name, rows in arms.items():
        secs = sum(r["seconds"] for r in rows)
        toks = sum(r["out_tokens"] or 0 for r in rows)
        same = sum(r["text"] == b["text"] for r, b in zip(rows, first, strict=True))
        summary[name] = {"seconds": round(secs, 1), "out_tokens": toks, "tok_per_s": round(toks / secs, 2),
                         "identical_to_first_arm": f"{same}/{len(rows)}"}
    rep = {"date": date.today().isoformat(), "machine": machine(), "model": str(model), "requests": len(reqs),
           "summary": summary, "arms": arms}
    write_dated(args.out, "local-model-decode-ab", rep, summary)


if __name__ == "__main__":
    main()
