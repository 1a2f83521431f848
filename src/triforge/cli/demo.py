"""`triforge demo`: an offline look at the machinery with a scripted model."""

from __future__ import annotations

from pathlib import Path

import typer

from triforge.cli.common import console


def demo(out: Path = typer.Option(Path("runs/demo"), "--out", help="Run directory to write.")) -> None:
    """Run a small ReAct agent against a scripted fake endpoint; leaves a full run directory."""
    from triforge.testing.demo import run_demo

    console.print("[bold]triforge demo[/]: the model is [yellow]scripted[/] (fake OpenAI-compatible server on "
                  "loopback); the client, agent loop, tools, budget and trace are real.")
    result = run_demo(out)
    console.print(f"answer: {result.output}  status: {result.status}  steps: {result.steps}")
    console.print(f"run directory: {out}  (trace.jsonl, results.json, report.md, trace.html)")
    if not result.submitted:
        raise typer.Exit(1)
