"""IFBench with the real local model: the seed two-stage program (answer, then rewrite) on a fixed subset.

Run (after `triforge local install`; not in CI, about 1-2 hours on 2 cores):
    .venv/bin/python benchmarks/local_model/ifbench_local.py [--limit 50] [--out runs/local-ifbench]

The strict run makes the real model calls (response cache `rw` in the run folder); the loose run scores the
same replies again from that cache (`replay`: no model call, so both scores describe the same responses).
Re-running resumes. Writes benchmarks/results/local-model-ifbench-DATE.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

from smoke import machine

from triforge.local.install import DEFAULT_MODEL, installed_model

RESULTS = Path(__file__).resolve().parents[1] / "results"
TRIFORGE = [str(Path(sys.executable).with_name("triforge"))]


def run(mode: str, out: Path, limit: int, cache_mode: str) -> None:
    cmd = [*TRIFORGE, "maestro", "run", "-b", "ifbench", "--model", "local", "--limit", str(limit), "--jobs", "1",
           "--cache", cache_mode, "--mode", mode, "--out", str(out / mode)]
    subprocess.run(cmd, check=False)


def load(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    latest: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        latest[f"{r['example_id']}#{r['sample']}"] = r
    return list(latest.values())


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    instr = [ok for r in rows for ok in (r.get("details") or {}).get("follow_instruction_list", [])]
    calls = [c for r in rows for n in (r.get("trace") or []) for c in n.get("llm_calls", [])]
    return {
        "examples": len(rows),
        "prompt_level": round(statistics.fmean(r["score"] for r in rows), 4) if rows else None,
        "instruction_level": round(sum(instr) / len(instr), 4) if instr else None,
        "errors": dict(Counter(r["error_kind"] for r in rows if r.get("error_kind"))),
        "llm_calls": len(calls), "output_tokens": sum(c.get("output_tokens", 0) for c in calls),
        "cached_calls": sum(bool(c.get("cached")) for c in calls),
        "wall_s": round(sum(r.get("duration_s", 0.0) for r in rows), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--out", default="runs/local-ifbench")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    os.environ.setdefault("TRIFORGE_LOCAL_TOOLS", "text")
    if not args.report_only:
        run("strict", out, args.limit, "rw")
        run("loose", out, args.limit, "replay")
    strict, loose = load(out / "strict" / "results.jsonl"), load(out / "loose" / "results.jsonl")
    model = installed_model()
    day = date.today().isoformat()
    parse_failures = [
        {"example": r["example_id"], "error": (r.get("error") or "")[:200]}
        for r in strict if r.get("error_kind")
    ]
    payload = {
        "date": day, "machine": machine(), "model_file": model.name if model else None,
        "model_sha256": DEFAULT_MODEL.sha256 if model and model.name == DEFAULT_MODEL.name else None,
        "program": "ifbench seed (answer -> rewrite)", "limit": args.limit,
        "max_tokens_per_reply": int(os.environ.get("TRIFORGE_LOCAL_MAX_TOKENS", "768")),
        "strict": summarize(strict), "loose": summarize(loose), "failures": parse_failures,
        "per_example": [{"example": r["example_id"], "strict": r["score"],
                         "instructions": (r.get("details") or {}).get("instruction_id_list"),
                         "followed": (r.get("details") or {}).get("follow_instruction_list")} for r in strict],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"local-model-ifbench-{day}.json").write_text(json.dumps(payload, indent=1))
    s, lo = payload["strict"], payload["loose"]
    md = [f"# IFBench with the real local model ({day})", "",
          f"- model: `{payload['model_file']}` (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M), SHA-256 `{payload['model_sha256']}`",
          f"- llama-cpp-python, text mode (GGUF chat template), at most {payload['max_tokens_per_reply']} tokens per "
          "reply, the program's sampling (temperature unset: the server's default, 0.8), one sample per example",
          f"- machine: {payload['machine']['cpu']}, {payload['machine']['cores_usable']} cores; the strict run took "
          f"{s['wall_s'] / 60:.0f} min of model time ({s['output_tokens'] / max(s['wall_s'], 1e-9):.1f} output tokens/s "
          "end to end, prompts included); the loose one reads the same replies from the cache",
          f"- program: the seed two-stage program (`triforge maestro show ifbench`), the first {args.limit} "
          "examples of the test split (`--limit`)", "",
          "| scoring | examples | prompt-level | instruction-level | errors | LLM calls | output tokens | wall s |",
          "|---|---|---|---|---|---|---|---|",
          f"| strict | {s['examples']} | {s['prompt_level']} | {s['instruction_level']} | {s['errors']} | "
          f"{s['llm_calls']} | {s['output_tokens']} | {s['wall_s']} |",
          f"| loose (same replies, from the cache) | {lo['examples']} | {lo['prompt_level']} | "
          f"{lo['instruction_level']} | {lo['errors']} | {lo['llm_calls']} ({lo['cached_calls']} cached) | "
          f"{lo['output_tokens']} | {lo['wall_s']} |", ""]
    if parse_failures:
        md += ["Replies the program could not read (format errors; the example scores 0, the run goes on):", ""]
        md += [f"- example {f['example']}: {f['error']}" for f in parse_failures]
    (RESULTS / f"local-model-ifbench-{day}.md").write_text("\n".join(md) + "\n")
    print(RESULTS / f"local-model-ifbench-{day}.md")


if __name__ == "__main__":
    main()
