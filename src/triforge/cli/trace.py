"""`triforge trace`: read a run directory's trace."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from triforge.cli.common import console
from triforge.core.trace_view import render_html, summarize

app = typer.Typer(help="Read a run's trace: HTML view and summary.", no_args_is_help=True)


@app.command()
def view(
    run_dir: Path = typer.Argument(..., help="A run directory holding trace.jsonl."),
    out: Path = typer.Option(None, "--out", help="Where to write the HTML (default RUN_DIR/trace.html)."),
) -> None:
    """Write a self-contained trace.html for a run."""
    path = render_html(run_dir, out)
    console.print(f"wrote {path}")


@app.command()
def summary(run_dir: Path = typer.Argument(..., help="A run directory holding trace.jsonl.")) -> None:
    """Print calls, tokens, cost and time per agent and per model."""
    for dim, rows in summarize(run_dir).items():
        table = Table(title=f"per {dim}")
        for col in (dim, "LLM calls", "tool calls", "input tok", "output tok", "USD", "seconds"):
            table.add_column(col, justify="left" if col == dim else "right")
        for key, r in sorted(rows.items()):
            table.add_row(key, str(r.calls), str(r.tool_calls), str(r.input_tokens), str(r.output_tokens),
                          f"{r.cost_usd:.4f}", f"{r.seconds:.2f}")
        console.print(table)
