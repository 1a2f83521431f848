"""`triforge cpagent solve` and `triforge cpagent bench`: the constraint-modelling agent."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import typer

from triforge.cli.common import (
    BaseUrlOpt,
    ExecutorOpt,
    KeyEnvOpt,
    ModelOpt,
    ProfileOpt,
    RayAddressOpt,
    console,
    console_err,
    fan_out,
)
from triforge.core import context
from triforge.core.budget import Budget, BudgetLimits
from triforge.core.cache import open_cache
from triforge.core.errors import UserError
from triforge.core.llm import get_llm
from triforge.core.react import AgentLimits
from triforge.core.trace import listening
from triforge.cpagent.agent import CPAgentConfig
from triforge.cpagent.small_model_aids import apply_profile
from triforge.cpagent.task import CPTask, task_from_file, task_from_problem
from triforge.ui.progress import Progress, TraceProgress

PromptOpt = typer.Option(None, "--project-prompt", help="Jinja template replacing the built-in CPMpy guide.")
CacheOpt = typer.Option(None, "--cache", help="Response cache: off, rw or replay (default: triforge.toml's `cache`).")
FreshOpt = typer.Option(False, "--fresh", help="Start afresh: earlier contents of --out are moved into "
                                              "--out/previous-<time>/ (nothing is deleted).")


def _config(max_steps: int, max_tokens: int | None, max_cost: float | None, max_wall: float | None,
            project_prompt: Path | None, fresh_check: bool, profile: str = "default") -> CPAgentConfig:
    if project_prompt is not None and not project_prompt.is_file():
        raise UserError(f"project prompt {project_prompt} not found")
    return apply_profile(CPAgentConfig(
        limits=AgentLimits(max_steps=max_steps, max_tokens=max_tokens, max_cost_usd=max_cost, max_wall_s=max_wall),
        project_prompt=project_prompt, fresh_check=fresh_check), profile)


@contextlib.contextmanager
def _llm(model: str | None, base_url: str | None, api_key_env: str | None, cache_mode: str | None = None):
    cache = open_cache(cache_mode)
    llm = get_llm(model, base_url=base_url, api_key_env=api_key_env)
    try:
        with context.use(cache=cache):
            yield llm
    finally:
        if cache is not None:
            cache.close()
        close = getattr(llm, "close", None)
        if callable(close):
            close()


def _tasks(data: Path | None, problems: list[str] | None, file: Path | None) -> list[CPTask]:
    if file is not None:
        return [task_from_file(file)]
    if data is None:
        raise UserError("give a problem: --data DIR --problem ID, or --file PROBLEM.md")
    from triforge.cpagent.dataset import load_dataset, load_problem

    if problems:
        return [task_from_problem(load_problem(data, pid)) for pid in problems]
    return [task_from_problem(p) for p in load_dataset(data)]


def solve(
    data: Path = typer.Option(None, "--data", help="A DCP-Bench folder (with --problem)."),
    problem: str = typer.Option(None, "--problem", help="Problem id in --data."),
    file: Path = typer.Option(None, "--file", help="A problem written in a text or Markdown file."),
    model: str = ModelOpt, base_url: str = BaseUrlOpt, api_key_env: str = KeyEnvOpt,
    out: Path = typer.Option(..., "--out", help="Run directory (re-running resumes)."),
    project_prompt: Path = PromptOpt,
    max_steps: int = typer.Option(30, "--max-steps"),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Token limit for the agent (input + output)."),
    max_cost: float = typer.Option(None, "--max-cost", help="USD limit."),
    max_wall: float = typer.Option(None, "--max-wall", help="Wall-time limit in seconds."),
    no_fresh_check: bool = typer.Option(False, "--no-fresh-check", help="Accept submissions unchecked (ablation)."),
    profile: str = ProfileOpt,
    cache: str = CacheOpt,
    fresh: bool = FreshOpt,
) -> None:
    """Solve one constraint problem with the agent; graded strictly on every instance when --data is given."""
    from triforge.cpagent.solve import solve_task

    if data is not None and not problem and file is None:
        raise UserError("--data needs --problem ID (or use `cpagent bench` for many problems)")
    [task] = _tasks(data, [problem] if problem else None, file)
    config = _config(max_steps, max_tokens, max_cost, max_wall, project_prompt, not no_fresh_check,
                     profile)
    before = None if fresh else _finished_run(out)
    with _llm(model, base_url, api_key_env, cache) as llm:
        console.print(f"cpagent on [bold]{task.id}[/] with model [bold]{llm.alias}[/] ({llm.config.model})")
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
    data: Path = typer.Option(..., "--data", help="A DCP-Bench folder."),
    problems: list[str] = typer.Option(None, "--problem", help="Only these problem ids (repeatable)."),
    model: str = ModelOpt, base_url: str = BaseUrlOpt, api_key_env: str = KeyEnvOpt,
    out: Path = typer.Option(..., "--out", help="Run directory (re-running resumes and skips finished work)."),
    jobs: int = typer.Option(4, "--jobs", min=1, help="Problems in parallel."),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Runs per problem (pass^k)."),
    project_prompt: Path = PromptOpt,
    max_steps: int = typer.Option(30, "--max-steps"),
    max_tokens: int = typer.Option(None, "--max-tokens"),
    max_cost: float = typer.Option(None, "--max-cost", help="USD limit per problem."),
    max_wall: float = typer.Option(None, "--max-wall", help="Wall-time limit per problem in seconds."),
    budget_usd: float = typer.Option(None, "--budget-usd", help="Hard USD limit for the whole benchmark."),
    no_fresh_check: bool = typer.Option(False, "--no-fresh-check", help="Accept submissions unchecked (ablation)."),
    profile: str = ProfileOpt,
    cache: str = CacheOpt,
    fresh: bool = FreshOpt,
    executor: str = ExecutorOpt,
    ray_address: str = RayAddressOpt,
) -> None:
    """Run the agent on every problem (x seeds) in parallel, grade strictly, write reports."""
    from triforge.cpagent.bench import run_bench

    tasks = _tasks(data, problems, None)
    config = _config(max_steps, max_tokens, max_cost, max_wall, project_prompt, not no_fresh_check,
                     profile)
    budget = Budget(BudgetLimits(max_usd=budget_usd)) if budget_usd else None
    progress = Progress("cpagent bench", total=len(tasks) * seeds, unit="problem")
    with fan_out(executor, ray_address), _llm(model, base_url, api_key_env, cache) as llm, progress, \
            listening(TraceProgress(progress, count_steps=False)):
        progress.set(0 if fresh else _finished(out))

        def done(key: str, rec: dict[str, Any]) -> None:
            progress.advance(1, last=f"{key}: {rec.get('grade', {}).get('status')}")

        summary = run_bench(tasks, llm, out, seeds=seeds, jobs=jobs, config=config, budget=budget, on_done=done,
                            data=data, fresh=fresh)
    k = summary["seeds"]
    console.print(f"pass@1 {summary['pass_at_1']:.1%}  pass^{k} {summary[f'pass^{k}']:.1%}  grades {summary['grades']}")
    console.print(f"reports: {out}/report.md, {out}/report.html, {out}/results.json")
    if summary.get("moved_aside"):
        console.print(f"earlier contents moved to {summary['moved_aside']}")
    if summary["unfinished"]:
        from triforge.cpagent.bench import unfinished_text

        console_err.print(f"[red]{unfinished_text(summary['unfinished'])}[/]")
        raise typer.Exit(2 if "endpoint_error" in summary["unfinished"] else 1)


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
