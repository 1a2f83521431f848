"""`triforge cpagent`: commands of the cpagent system."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from triforge.cli.common import console, console_err
from triforge.core.errors import UserError

app = typer.Typer(help="cpagent commands.", no_args_is_help=True)

_DATA_HELP = ("A data set name (default: the bundled dcp-bench-open; `triforge data list`) or a path: a "
              "DCP-Bench-Open checkout, its dataset/ folder, or a zip of it.")


@app.command("refs")
def refs(
    data: str = typer.Option(None, "--data", help=_DATA_HELP),
    problem: list[str] = typer.Option(None, "--problem", help="Problem id (repeatable); default: all."),
    jobs: int = typer.Option(None, "--jobs", min=1, help="References run in parallel (default: one per core)."),
    rerun: bool = typer.Option(False, "--rerun", help="Run every reference again, also those whose result is "
                               "cached for the same inputs (reference, instance, budget, solver versions)."),
    default_only: bool = typer.Option(False, "--default-only", help="Only each problem's default instance."),
    beyond_reach: bool = typer.Option(False, "--include-beyond-reach",
                                      help="Also run the instances listed as beyond reach (ref_budgets.toml)."),
    json_out: Path = typer.Option(None, "--json", help="Write every result to this JSON file."),
) -> None:
    """Run each reference model on every instance; exit 0 only if all produce a valid solution in time.

    Budgets are the `# Timeout:` headers, or the measured ones in cpagent/ref_budgets.toml; instances
    listed there as having no solution pass only when the reference proves it; instances listed as
    marginal (solved in some runs on a 2-core machine, not in others) may also run out of time.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from triforge.cpagent.dataset import load_dataset
    from triforge.cpagent.refs import RefCache, RefResult, all_tasks, default_jobs, dominating, run_references

    jobs = jobs or default_jobs()
    problems = load_dataset(data, problem or None)
    if default_only:
        problems = [_only_default(p) for p in problems]
    total = len(all_tasks(problems, beyond_reach=beyond_reach))
    skipped = len(all_tasks(problems)) - total
    t0 = time.perf_counter()
    with Progress(TextColumn("refs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=console_err, transient=True) as bar:
        task = bar.add_task("", total=total)

        def done(r: RefResult) -> None:
            bar.update(task, advance=1, description=f"{r.problem_id}#{r.instance} {'ok' if r.ok else r.status}")

        results = run_references(problems, jobs=jobs, on_done=done, cache=RefCache(), beyond_reach=beyond_reach,
                                 reuse=not rerun)
    wall = time.perf_counter() - t0
    table = Table(show_lines=False)
    for col in ("problem", "inst", "status", "objective", "seconds", "reason"):
        table.add_column(col)
    for r in results:
        if r.ok and not r.reason and len(results) > 40:
            continue  # a long run lists only what is not a plain success
        style = "green" if r.as_expected else "red"
        table.add_row(r.problem_id, str(r.instance), f"[{style}]{r.status}[/]", _fmt(r.objective),
                      f"{r.duration_s:.2f}", r.reason)
    if table.row_count:
        console.print(table)
    passed = sum(r.as_expected for r in results)
    unsat = sum(r.as_expected and not r.ok and r.expected == "no_solution" for r in results)
    marginal = sum(r.as_expected and not r.ok and r.expected == "marginal" for r in results)
    cached = sum(r.cached for r in results)
    console.print(f"{passed}/{len(results)} reference runs as expected over {len(problems)} problems"
                  + (f" ({unsat} proven to have no solution, as listed)" if unsat else "")
                  + (f" ({marginal} listed as marginal ran out of time, allowed)" if marginal else "")
                  + f", jobs={jobs}, wall {wall:.1f} s"
                  + (f"; {cached} unchanged since their cached run, not run again (--rerun runs them)" if cached else ""))
    if line := dominating(results):
        console.print(line[0].upper() + line[1:], highlight=False)
    if skipped:
        console.print(f"{skipped} instance(s) listed as beyond reach were not run (--include-beyond-reach runs them; "
                      "see src/triforge/cpagent/ref_budgets.toml)")
    if json_out:
        json_out.write_text(json.dumps({"wall_s": wall, "jobs": jobs, "skipped_beyond_reach": skipped,
                                        "cached": cached,
                                        "results": [r.to_json() for r in results]}, indent=1))
    raise typer.Exit(0 if passed == len(results) else 1)


def _only_default(p):  # noqa: ANN001, ANN202 - a Problem limited to its default instance
    from dataclasses import replace

    return replace(p, instances=p.instances[:1])


def _fmt(v: object) -> str:
    return "" if v is None else str(v)


@app.command("grade")
def grade(
    data: str = typer.Option(None, "--data", help=_DATA_HELP),
    problem: str = typer.Option(..., "--problem", help="Problem id."),
    submission: Path = typer.Option(..., "--submission", help="A Python program or a .json solution."),
    instance: int = typer.Option(None, "--instance", help="Instance index (default 0)."),
    all_instances: bool = typer.Option(False, "--all-instances", help="Grade every instance."),
    solver: str = typer.Option("ortools", "--solver", help="CPMpy backend for the check (ortools, exact, choco)."),
    as_json: bool = typer.Option(False, "--json", help="Print verdicts as JSON."),
    strict_types: bool = typer.Option(False, "--strict-types",
                                      help="Refuse 0/1 where the reference prints booleans (read as booleans "
                                           "by default, with a note)."),
    model_check: str = typer.Option("sample", "--model-check",
                                    help="Check the program's model, not only what it printed: off, sample (the "
                                         "first instance, bounded) or full (every instance, larger bounds)."),
) -> None:
    """Grade a submission strictly; exit 0 only if it is correct on every instance asked for."""
    from triforge.cpagent.dataset import load_problem
    from triforge.cpagent.grader import grade_program
    from triforge.cpagent.model_check import check_mode
    from triforge.cpagent.refs import RefCache

    if instance is not None and all_instances:
        raise UserError("give either --instance K or --all-instances, not both")
    _check_solver(solver)
    prob = load_problem(data, problem)
    wanted = list(range(prob.n_instances)) if all_instances else [instance or 0]
    check_mode(model_check)
    verdicts = grade_program(prob, submission, wanted, solver=solver, cache=RefCache(), strict_types=strict_types,
                             model_check=model_check)
    if as_json:
        console.print_json(json.dumps([v.to_json() for v in verdicts]))
    else:
        for v in verdicts:
            style = "green" if v.correct else "red"
            line = f"{v.problem_id}#{v.instance}: [{style}]{v.verdict}[/]"
            if v.objective is not None:
                line += f" (objective {v.objective}, optimum {v.optimum})"
            console.print(line)
            for reason in v.reasons:
                console.print(f"  - {reason}", highlight=False)
            if v.model_check:
                mc = v.model_check
                console.print(f"  model: {mc['soundness']} ({mc['coverage']}); completeness: {mc['completeness']}",
                              highlight=False)
            for note in v.notes:
                console.print(f"  note: {note}", highlight=False, style="dim")
        if verdicts and verdicts[0].isolation:
            console.print(f"isolation: {verdicts[0].isolation}", highlight=False, style="dim")
        ok = sum(v.correct for v in verdicts)
        console.print(f"{ok}/{len(verdicts)} correct (solver {solver})")
    raise typer.Exit(0 if all(v.correct for v in verdicts) else 1)


def _check_solver(solver: str) -> None:
    import importlib.util

    if solver == "ortools" and importlib.util.find_spec("ortools") is not None:
        return  # the default: known without importing cpmpy here (about half a second of a grading call)
    import cpmpy

    names = [n for n, cls in cpmpy.SolverLookup.base_solvers() if cls.supported()]
    if solver.split(":")[0] not in names:
        raise UserError(f"unknown or uninstalled solver {solver!r}; installed: {', '.join(names)}")
