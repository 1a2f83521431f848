"""`triforge maestro`: commands of the maestro system."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from triforge.cli.common import (
    DEFAULT_OUT_HELP,
    BaseUrlOpt,
    ExecutorOpt,
    KeyEnvOpt,
    ModelOpt,
    RayAddressOpt,
    console,
    console_err,
    default_out,
    fan_out,
)
from triforge.cli.isolation_line import announce_isolation
from triforge.cli.maestro_score import score
from triforge.core.errors import BudgetExceeded, UserError

app = typer.Typer(help="maestro commands.", no_args_is_help=True)


class _Bar:
    """The run's progress bar, drawn only once the run starts: bad input is refused before any bar shows."""

    def __init__(self) -> None:
        self.progress: Progress | None = None
        self.bar: Any = None

    def start(self, total: int) -> None:
        self.progress = Progress(TextColumn("[bold]maestro run"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.description}"), console=console,
                                 transient=False)
        self.progress.start()
        self.bar = self.progress.add_task("", total=total)

    def done(self, r: Any) -> None:
        if self.progress is not None:
            self.progress.update(self.bar, advance=1, description=f"{r.example_id}: {r.score:.2f}")

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()


@app.command()
def run(
    program: str = typer.Option(None, "--program", "-p",
                                help="Seed name (hotpotqa, ifbench, cpbench), a .json/.toml program, or "
                                     "module:function (default: the benchmark's seed)."),
    bench: str = typer.Option(..., "--bench", "-b", help="hotpotqa, ifbench or cpbench."),
    split: str = typer.Option("test", "--split", help="train, val, test, or all."),
    model: str = ModelOpt, base_url: str = BaseUrlOpt, api_key_env: str = KeyEnvOpt,
    out: Path = typer.Option(None, "--out", help=DEFAULT_OUT_HELP + " Finished examples are kept."),
    data: str = typer.Option(None, "--data", help="Benchmark data: a data set name (`triforge data list`) or a "
                                                  "file or folder. Default: the bundled set (ifbench, "
                                                  "dcp-bench-open; HotpotQA: hotpotqa-mini)."),
    corpus: str = typer.Option(None, "--corpus", help="HotpotQA abstracts as JSONL {title, text} (default: "
                                                      "the set's abstracts or the data's contexts)."),
    mode: str = typer.Option("strict", "--mode", help="IFBench scoring: strict or loose."),
    limit: int = typer.Option(None, "--limit", min=1, help="Only the first N examples of the split."),
    jobs: int = typer.Option(None, "--jobs", min=1, help="Examples in parallel (default 16; 4 for cpbench); "
                                                         "calls per endpoint stay capped by its max_concurrency."),
    samples: int = typer.Option(1, "--samples", min=1, help="Runs per example (distinct sample indices)."),
    cache: str = typer.Option(None, "--cache", help="Response cache: off, rw or replay."),
    budget_usd: float = typer.Option(None, "--budget-usd", help="USD for the run (from the alias's prices): no "
                                                                "call starts once it is reached."),
    html: bool = typer.Option(False, "--html", help="Also write trace.html."),
    fresh: bool = typer.Option(False, "--fresh", help="Start afresh: earlier contents of --out are moved into "
                                                      "--out/previous-<time>/ (nothing is deleted)."),
    executor: str = ExecutorOpt,
    ray_address: str = RayAddressOpt,
) -> None:
    """Evaluate a program on a benchmark split; writes per-example results and traces to --out."""
    from triforge.core.budget import BudgetLimits
    from triforge.core.run import open_run
    from triforge.maestro.bench import benchmark_class
    from triforge.maestro.run import evaluate_to_dir

    benchmark_class(bench)  # a misspelt name is refused before the model is asked for
    out = out or default_out(bench)
    if bench == "cpbench":
        announce_isolation()
    try:
        with fan_out(executor, ray_address), open_run(out, model=model, base_url=base_url, api_key_env=api_key_env,
                                                      cache=cache, limits=BudgetLimits(max_usd=budget_usd),
                                                      trace=True) as opened, _Bar() as bar:
            summary = evaluate_to_dir(program, bench, split, opened.models, out, data=data, corpus=corpus, mode=mode,
                                      limit=limit, jobs=jobs, samples=samples, fresh=fresh, on_start=bar.start,
                                      on_result=bar.done,
                                      on_data=lambda d: console.print(f"data: {d}", highlight=False))
    except BudgetExceeded as e:
        console_err.print(f"[red]{e}[/]; finished examples are kept in {out}: raise --budget-usd and re-run "
                          "to resume")
        raise typer.Exit(1) from None
    if html:
        from triforge.ui.trace_view import render_html

        render_html(out)
    console.print(f"{summary['bench']} / {summary['split']}: mean score [bold]{summary['mean_score']:.3f}[/] over "
                  f"{summary['n']} run(s); errors {summary['errors'] or 'none'}; "
                  f"{summary['cached']} from earlier runs")
    console.print(f"run directory: {out} (results.jsonl, results.json, report.md, trace.jsonl, program.json)")
    if summary.get("moved_aside"):
        console.print(f"earlier contents moved to {summary['moved_aside']}")
    if summary["n"] and summary["errors"].get("endpoint", 0) == summary["n"]:
        console_err.print("[red]every example failed at the endpoint; check --model/--base-url and re-run to "
                          "resume[/]")
        raise typer.Exit(2)


@app.command()
def show(
    program: str = typer.Argument(..., help="Seed name, a .json/.toml program, or module:function."),
    fmt: str = typer.Option("text", "--format", "-f", help="text, mermaid, json or toml."),
) -> None:
    """Print a program's graph."""
    from triforge.maestro.programs import load_program
    from triforge.maestro.render import to_mermaid, to_text

    prog = load_program(program)
    render = {"text": to_text, "mermaid": to_mermaid, "json": lambda p: p.to_json(), "toml": lambda p: p.to_toml()}
    if fmt not in render:
        raise UserError(f"--format must be one of {', '.join(render)}, not {fmt!r}")
    typer.echo(render[fmt](prog), nl=False)


app.command("score")(score)

from triforge.cli.maestro_optimize import register as _register_optimize  # noqa: E402  (optimize, compare)

_register_optimize(app)
