"""`triforge trace`: read a run directory's trace."""

from __future__ import annotations

from pathlib import Path

import typer
from rich import box
from rich.table import Table

from triforge.cli.common import console
from triforge.ui.trace_view import isolation_held, render_html, runs_note, summarize

app = typer.Typer(help="Read a run's trace: HTML view and summary.", no_args_is_help=True)

RunArg = typer.Argument(..., help="A run directory holding trace.jsonl, or the trace.jsonl file itself.")


@app.command()
def view(
    run_dir: Path = RunArg,
    out: Path = typer.Option(None, "--out", help="Where to write the HTML (default: trace.html beside the trace)."),
) -> None:
    """Write a self-contained trace.html for a run."""
    path = render_html(run_dir, out)
    console.print(f"wrote {path}", soft_wrap=True)


@app.command()
def summary(run_dir: Path = RunArg) -> None:
    """Print calls, tokens, cost and time per agent and per model."""
    for dim, rows in summarize(run_dir).items():
        # Compact columns so the table fits 80 columns; a long name folds onto the next line, never cut.
        table = Table(title=f"per {dim}", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column(dim, overflow="fold", ratio=1, min_width=10)
        for col in ("LLM\ncalls", "tool\ncalls", "input\ntokens", "output\ntokens", "USD", "seconds"):
            table.add_column(col, justify="right", no_wrap=True)
        for key, r in sorted(rows.items()):
            table.add_row(key, str(r.calls), str(r.tool_calls), f"{r.input_tokens:,}", f"{r.output_tokens:,}",
                          f"{r.cost_usd:.4f}", f"{r.seconds:.1f}")
        console.print(table)
    note = runs_note(run_dir)
    if note:
        console.print(f"note: {note}")
    for held in isolation_held(run_dir):
        console.print(f"isolation: {held}", highlight=False)  # folded at the terminal's width
