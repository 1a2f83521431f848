"""`triforge demo`: an offline look at the machinery with a scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from triforge.cli.common import console
from triforge.core.errors import UserError

# Everything a demo run writes; a new demo replaces them all, so its trace never continues an old one.
DEMO_FILES = ("config.json", "trace.jsonl", "trace.html", "results.json", "report.md", "demo.trajectory.json")


def _clear_earlier_demo(out: Path) -> str | None:
    """Remove an earlier demo run from `out` (it is reproducible); refuse a folder holding another run."""
    if not (out / "trace.jsonl").exists():
        return None
    try:
        cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cfg = {}
    if not (isinstance(cfg, dict) and (cfg.get("model") or {}).get("alias") == "scripted-demo"):
        raise UserError(f"{out} holds another run's trace (not a demo); pass --out with a new or empty folder")
    for name in DEMO_FILES:
        (out / name).unlink(missing_ok=True)
    return str(cfg.get("written_at") or "an earlier time")


def demo(out: Path = typer.Option(Path("runs/demo"), "--out", help="Run directory to write (an earlier demo "
                                                                    "run there is replaced).")) -> None:
    """Run a small ReAct agent against a scripted fake endpoint; leaves a full run directory."""
    from triforge.testing.demo import run_demo

    earlier = _clear_earlier_demo(out)
    console.print("[bold]triforge demo[/]: the model is [yellow]scripted[/] (fake OpenAI-compatible server on "
                  "loopback); the client, agent loop, tools, budget and trace are real.")
    if earlier:
        console.print(f"replaced the earlier demo run in {out} (from {earlier}); its trace starts afresh")
    result = run_demo(out)
    console.print(f"answer: {result.output}  status: {result.status}  steps: {result.steps}")
    console.print(f"run directory: {out}  (trace.jsonl, results.json, report.md, trace.html)")
    if not result.submitted:
        raise typer.Exit(1)
