"""`triforge cpagent solve` and `triforge cpagent bench`: the constraint-modelling agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from triforge.cli.common import (
    DEFAULT_OUT_HELP,
    BaseUrlOpt,
    CacheOpt,
    ExecutorOpt,
    FreshOpt,
    KeyEnvOpt,
    ModelOpt,
    ProfileOpt,
    RayAddressOpt,
    console,
    console_err,
    default_out,
    fan_out,
)
from triforge.cli.isolation_line import announce_isolation
from triforge.core.budget import BudgetLimits
from triforge.core.errors import UserError
from triforge.core.react import AgentLimits
from triforge.core.run import open_run
from triforge.core.trace import listening
from triforge.cpagent.agent import CPAgentConfig
from triforge.cpagent.small_model_aids import apply_profile
from triforge.cpagent.task import CPTask, task_from_file, task_from_problem
from triforge.ui.progress import Progress, TraceProgress

WALL_HELP = ("Wall-time limit in seconds for the agent: checked before each model call and each tool call, and "
             "a running cell is cut at it; a model reply in flight is awaited (bounded by the endpoint's "
             "timeout_s); grading afterwards is not counted.")
PromptOpt = typer.Option(None, "--project-prompt", help="Jinja template replacing the built-in CPMpy guide.")
ModelCheckOpt = typer.Option("sample", "--model-check", help="Grading checks the submitted model, not only "
                             "its printed solution: off, sample (first instance, bounded) or full (every instance).")


def _with_model_check(config: CPAgentConfig, mode: str) -> CPAgentConfig:
    from dataclasses import replace

    from triforge.cpagent.model_check import check_mode

    return replace(config, model_check=check_mode(mode))


def _config(max_steps: int, max_tokens: int | None, max_cost: float | None, max_wall: float | None,
            project_prompt: Path | None, fresh_check: bool, profile: str = "default") -> CPAgentConfig:
    if project_prompt is not None and not project_prompt.is_file():
        raise UserError(f"project prompt {project_prompt} not found")
    return apply_profile(CPAgentConfig(
        limits=AgentLimits(max_steps=max_steps, max_tokens=max_tokens, max_cost_usd=max_cost, max_wall_s=max_wall),
        project_prompt=project_prompt, fresh_check=fresh_check), profile)


def _tasks(data: str | None, problems: list[str] | None, file: Path | None) -> list[CPTask]:
    if file is not None:
        return [task_from_file(file)]
    from triforge.cpagent.dataset import load_dataset, load_problem

    if problems:
        return [task_from_problem(load_problem(data, pid)) for pid in problems]
    return [task_from_problem(p) for p in load_dataset(data)]


def solve(
    data: str = typer.Option(None, "--data", help="A data set name or a DCP-Bench-Open folder or zip, for "
                             "--problem (default: the bundled dcp-bench-open)."),
    problem: str = typer.Option(None, "--problem", help="Problem id in --data."),
    file: Path = typer.Option(None, "--file", help="A problem written in a text or Markdown file."),
    model: str = ModelOpt, base_url: str = BaseUrlOpt, api_key_env: str = KeyEnvOpt,
    out: Path = typer.Option(None, "--out", help=DEFAULT_OUT_HELP),
    project_prompt: Path = PromptOpt,
    max_steps: int = typer.Option(30, "--max-steps"),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Token limit for the agent (input + output)."),
    max_cost: float = typer.Option(None, "--max-cost", help="USD limit."),
    max_wall: float = typer.Option(None, "--max-wall", help=WALL_HELP),
    no_fresh_check: bool = typer.Option(False, "--no-fresh-check", help="Accept submissions unchecked (ablation)."),
    model_check: str = ModelCheckOpt,
    profile: str = ProfileOpt,
    cache: str = CacheOpt,
    fresh: bool = FreshOpt,
) -> None:
    """Solve one constraint problem with the agent; a CP-Bench problem is graded strictly on every instance."""
    from triforge.cpagent.solve import solve_task

    if data is not None and not problem and file is None:
        raise UserError("--data needs --problem ID (or use `cpagent bench` for many problems)")
    if not problem and file is None:
        raise UserError("give a problem: --problem ID (in the bundled CP-Bench, or in --data), or --file PROBLEM.md")
    [task] = _tasks(data, [problem] if problem else None, file)
    out = out or default_out(task.id)
    config = _config(max_steps, max_tokens, max_cost, max_wall, project_prompt, not no_fresh_check,
                     profile)
    config = _with_model_check(config, model_check)
    before = None if fresh else _finished_run(out)
    with open_run(out, model=model, base_url=base_url, api_key_env=api_key_env, cache=cache) as run:
        llm = run.model
        console.print(f"cpagent on [bold]{task.id}[/] with model [bold]{llm.alias}[/] ({llm.config.model}); "
                      f"run directory {out}")
        announce_isolation()
        progress = Progress("cpagent", total=config.limits.max_steps)
        with progress, listening(TraceProgress(progress)):
            rec = solve_task(task, llm, out, config=config, fresh=fresh)
    if before is not None and rec == before[0]:
        console.print(f"[yellow]{out} holds a finished run from {before[1]}: nothing ran now, this is its result. "
                      f"To run afresh, add --fresh (earlier contents are moved aside) or pass another --out.[/]")
    g = rec.get("grade", {})
    console.print(f"agent: {rec['status']} after {rec['steps']} steps; grade: [bold]{g.get('status')}[/]")
    for reason in g.get("reasons", [])[:5]:
        console.print(f"  - {reason}")
    files = [f for f in ("solution.py", "solution.json", "trace.html", "report.md") if (out / f).is_file()]
    console.print(f"run directory: {out} ({', '.join(files)})")
    if rec.get("moved_aside"):
        console.print(f"earlier contents moved to {rec['moved_aside']}")
    if rec["status"] == "endpoint_error":
        console.print("[red]the endpoint failed; the run directory is intact: re-run the same command to resume[/]")
        raise typer.Exit(2)
    if g.get("status") not in ("correct", "ungraded"):
        raise typer.Exit(1)


def bench(
    data: str = typer.Option(None, "--data", help="A data set name (default: the bundled dcp-bench-open) or a "
                             "DCP-Bench-Open folder or zip."),
    problems: list[str] = typer.Option(None, "--problem", help="Only these problem ids (repeatable)."),
    model: str = ModelOpt, base_url: str = BaseUrlOpt, api_key_env: str = KeyEnvOpt,
    out: Path = typer.Option(None, "--out", help=DEFAULT_OUT_HELP + " Finished problems are skipped."),
    jobs: int = typer.Option(4, "--jobs", min=1, help="Problems in parallel."),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Runs per problem (pass^k)."),
    project_prompt: Path = PromptOpt,
    max_steps: int = typer.Option(30, "--max-steps"),
    max_tokens: int = typer.Option(None, "--max-tokens"),
    max_cost: float = typer.Option(None, "--max-cost", help="USD limit per problem."),
    max_wall: float = typer.Option(None, "--max-wall", help="Per problem. " + WALL_HELP),
    budget_usd: float = typer.Option(None, "--budget-usd", help="USD for the whole benchmark (from the alias's "
                                     "prices): no call starts once it is reached; calls in flight finish."),
    no_fresh_check: bool = typer.Option(False, "--no-fresh-check", help="Accept submissions unchecked (ablation)."),
    model_check: str = ModelCheckOpt,
    profile: str = ProfileOpt,
    cache: str = CacheOpt,
    fresh: bool = FreshOpt,
    executor: str = ExecutorOpt,
    ray_address: str = RayAddressOpt,
) -> None:
    """Run the agent on every problem (x seeds) in parallel, grade strictly, write reports."""
    from triforge.cpagent.bench import run_bench

    tasks = _tasks(data, problems, None)
    out = out or default_out("cpbench")
    config = _config(max_steps, max_tokens, max_cost, max_wall, project_prompt, not no_fresh_check,
                     profile)
    config = _with_model_check(config, model_check)
    announce_isolation()
    progress = Progress("cpagent bench", total=len(tasks) * seeds, unit="problem")
    with fan_out(executor, ray_address), open_run(out, model=model, base_url=base_url, api_key_env=api_key_env,
                                                  cache=cache, limits=BudgetLimits(max_usd=budget_usd)) as run, \
            progress, listening(TraceProgress(progress, count_steps=False)):
        progress.set(0 if fresh else _finished(out))

        def done(key: str, rec: dict[str, Any]) -> None:
            progress.advance(1, last=f"{key}: {rec.get('grade', {}).get('status')}")

        summary = run_bench(tasks, run.model, out, seeds=seeds, jobs=jobs, config=config, budget=run.budget,
                            on_done=done, data=_data_label(data), fresh=fresh)
    k = summary["seeds"]
    console.print(f"pass@1 {summary['pass_at_1']:.1%}  pass^{k} {summary[f'pass^{k}']:.1%}  grades {summary['grades']}")
    console.print(f"reports: {out}/report.md, {out}/report.html, {out}/results.json")
    if summary.get("moved_aside"):
        console.print(f"earlier contents moved to {summary['moved_aside']}")
    if summary["unfinished"]:
        from triforge.cpagent.bench import unfinished_text

        console_err.print(f"[red]{unfinished_text(summary['unfinished'])}[/]")
        raise typer.Exit(2 if "endpoint_error" in summary["unfinished"] else 1)


def _data_label(data: str | None) -> str:
    """The data as the run's settings record it: a set's name (the default's too), or the path given."""
    from triforge.data import lookup

    ds = lookup(data, "cpbench")
    return ds.name if ds is not None else str(data)


def _finished_run(out: Path) -> tuple[dict[str, Any], str] | None:
    """The finished record in `out` and when it was written (UTC), or None."""
    import time

    from triforge.core.rundir import RunDir
    from triforge.cpagent.solve import FINAL

    rd = RunDir(out) if out.is_dir() else None
    rec = rd.load_results() if rd else {}
    if rec.get("status") not in FINAL:
        return None
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(rd.results_path.stat().st_mtime))  # type: ignore[union-attr]
    return rec, when


def _finished(out: Path) -> int:
    from triforge.core.rundir import RunDir
    from triforge.cpagent.solve import FINAL

    if not (out / "results.json").is_file():
        return 0
    runs = RunDir(out).load_results().get("runs", {})
    return sum(r.get("status") in FINAL for r in runs.values())
