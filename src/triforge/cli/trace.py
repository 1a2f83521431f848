"""`triforge trace`: read a run directory's trace."""

from __future__ import annotations

from pathlib import Path

import typer
from rich import box
from rich.table import Table

from triforge.cli.common import console, console_err
from triforge.ui.trace_view import (
    dropped_lines,
    isolation_held,
    render_html,
    runs_note,
    summarize,
    token_details_shown,
)

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
    """Print calls, tokens, cost and time per agent and per model.

    A last line cut mid-write (a crash) is left out of the totals, with a warning on stderr that names it;
    the exit status stays 0. A line torn anywhere else makes the trace corrupt (exit 2).
    """
    summary_rows = summarize(run_dir)
    details = token_details_shown(summary_rows)  # reasoning (in output) and cached (in input) tokens
    for dim, rows in summary_rows.items():
        # Compact columns so the table fits 80 columns; a long name folds onto the next line, never cut.
        table = Table(title=f"per {dim}", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column(dim, overflow="fold", ratio=1, min_width=10)
        cols = ("LLM\ncalls", "tool\ncalls", "input\ntokens", "output\ntokens",
                *(("reason-\ning", "cached\ninput") if details else ()), "USD", "seconds")
        for col in cols:
            table.add_column(col, justify="right", no_wrap=True)
        for key, r in sorted(rows.items()):
            extra = (f"{r.reasoning_tokens:,}", f"{r.cached_input_tokens:,}") if details else ()
            table.add_row(key, str(r.calls), str(r.tool_calls), f"{r.input_tokens:,}", f"{r.output_tokens:,}",
                          *extra, f"{r.cost_usd:.4f}", f"{r.seconds:.1f}")
        console.print(table)
    note = runs_note(run_dir)
    if note:
        console.print(f"note: {note}")
    for held in isolation_held(run_dir):
        console.print(f"isolation: {held}", highlight=False)
    dropped = dropped_lines(run_dir)
    if dropped:
        console_err.print(f"warning: {len(dropped)} line(s) of the trace could not be read and were dropped "
                          f"(line {', '.join(map(str, dropped))}: cut mid-write, as by a crash); the totals "
                          f"above leave them out", style="yellow", highlight=False)
