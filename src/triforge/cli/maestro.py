"""`triforge maestro`: commands of the maestro system."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from triforge.cli.common import (
    BaseUrlOpt,
    ExecutorOpt,
    KeyEnvOpt,
    ModelOpt,
    RayAddressOpt,
    console,
    console_err,
    fan_out,
)
from triforge.cli.maestro_score import score
from triforge.core.errors import BudgetExceeded, UserError

app = typer.Typer(help="maestro commands.", no_args_is_help=True)



class ModelPool:
    """The run's default model, plus any other alias a node names, each opened once and closed at the end."""

    def __init__(self, model: str | None, base_url: str | None, api_key_env: str | None) -> None:
        from triforge.core.llm import get_llm

        self._get, self._base_url, self._key_env, self._model = get_llm, base_url, api_key_env, model
        self._lock = threading.Lock()
        self.default = get_llm(model, base_url=base_url, api_key_env=api_key_env)
        self._opened: dict[str, Any] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its options: a task on another process opens its own models."""
        return (type(self), (self._model, self._base_url, self._key_env))

    def __call__(self, alias: str | None) -> Any:
        if alias is None or alias == self.default.alias:
            return self.default
        with self._lock:
            if alias not in self._opened:
                self._opened[alias] = self._get(alias, base_url=self._base_url, api_key_env=self._key_env)
            return self._opened[alias]

    def close(self) -> None:
        for llm in [self.default, *self._opened.values()]:
            close = getattr(llm, "close", None)
            if callable(close):
                close()


@contextlib.contextmanager
def _services(out: Path, cache_mode: str | None, budget_usd: float | None) -> Iterator[None]:
    from triforge.core import context
    from triforge.core.budget import Budget, BudgetLimits
    from triforge.core.cache import open_cache
    from triforge.core.trace import Tracer

    cache = open_cache(cache_mode)
    budget = Budget(BudgetLimits(max_usd=budget_usd)) if budget_usd else None
    try:
        with context.use(cache=cache, tracer=Tracer(out), budget=budget, limits=context.EndpointLimits()):
            yield
    finally:
        if cache is not None:
            cache.close()


@app.command()
def run(
    program: str = typer.Option(None, "--program", "-p",
                                help="Seed name (hotpotqa, ifbench, cpbench), a .json/.toml program, or "
                                     "module:function (default: the benchmark's seed)."),
    bench: str = typer.Option(..., "--bench", "-b", help="hotpotqa, ifbench or cpbench."),
    split: str = typer.Option("test", "--split", help="train, val, test, or all."),
    model: str = ModelOpt, base_url: str = BaseUrlOpt, api_key_env: str = KeyEnvOpt,
    out: Path = typer.Option(..., "--out", help="Run directory (re-running resumes finished examples)."),
    data: str = typer.Option(None, "--data", help="Benchmark data: a file or folder (HotpotQA default: the "
                                                  "shipped mini set)."),
    corpus: str = typer.Option(None, "--corpus", help="HotpotQA abstracts as JSONL {title, text} (default: "
                                                      "the data file's contexts, or the mini corpus)."),
    mode: str = typer.Option("strict", "--mode", help="IFBench scoring: strict or loose."),
    limit: int = typer.Option(None, "--limit", min=1, help="Only the first N examples of the split."),
    jobs: int = typer.Option(None, "--jobs", min=1, help="Examples in parallel (default 16; 4 for cpbench); "
                                                         "calls per endpoint stay capped by its max_concurrency."),
    samples: int = typer.Option(1, "--samples", min=1, help="Runs per example (distinct sample indices)."),
    cache: str = typer.Option(None, "--cache", help="Response cache: off, rw or replay."),
    budget_usd: float = typer.Option(None, "--budget-usd", help="Hard USD limit for the run."),
    html: bool = typer.Option(False, "--html", help="Also write trace.html."),
    fresh: bool = typer.Option(False, "--fresh", help="Start afresh: earlier contents of --out are moved into "
                                                      "--out/previous-<time>/ (nothing is deleted)."),
    executor: str = ExecutorOpt,
    ray_address: str = RayAddressOpt,
) -> None:
    """Evaluate a program on a benchmark split; writes per-example results and traces to --out."""
    from triforge.maestro.run import evaluate_to_dir

    pool = ModelPool(model, base_url, api_key_env)
    try:
        with fan_out(executor, ray_address), _services(out, cache, budget_usd), Progress(
            TextColumn("[bold]maestro run"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.description}"), console=console, transient=False,
        ) as progress:
            bar = progress.add_task("", total=None)

            def started(total: int) -> None:
                progress.update(bar, total=total)

            def done(r: Any) -> None:
                progress.update(bar, advance=1, description=f"{r.example_id}: {r.score:.2f}")

            summary = evaluate_to_dir(program, bench, split, pool, out, data=data, corpus=corpus, mode=mode,
                                      limit=limit, jobs=jobs, samples=samples, fresh=fresh, on_start=started,
                                      on_result=done)
    except BudgetExceeded as e:
        console_err.print(f"[red]{e}[/]; finished examples are kept in {out}: raise --budget-usd and re-run "
                          "to resume")
        raise typer.Exit(1) from None
    finally:
        pool.close()
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
