"""`triforge astra optimize` and `triforge astra evaluate`: the agents' loop, and deferred evaluation."""

from __future__ import annotations

import contextlib
import shlex
import shutil
import sys
from pathlib import Path

import typer

from triforge.cli.common import (
    DEFAULT_OUT_HELP,
    BaseUrlOpt,
    CacheOpt,
    ExecutorOpt,
    KeyEnvOpt,
    MaxCallsOpt,
    MaxUsdOpt,
    ModelOpt,
    ProfileOpt,
    RayAddressOpt,
    console,
    default_out,
    renamed,
)
from triforge.cli.invocation import runnable
from triforge.cli.isolation_line import announce_isolation
from triforge.core.errors import UserError
from triforge.core.rundir import make_run_dir
from triforge.core.textfile import read_user_text

EXIT_WAITING = 3


def parse_role_models(items: list[str] | None, single: bool) -> dict[str, str]:
    from triforge.astra.agents import ROLES, SINGLE

    known = (SINGLE,) if single else ROLES
    out: dict[str, str] = {}
    for item in items or []:
        role, sep, alias = item.partition("=")
        if not sep or not alias.strip():
            raise UserError(f"--role-model {item!r}: write ROLE=ALIAS, e.g. coding=gpt")
        if role not in known:
            raise UserError(f"--role-model {item!r}: unknown role {role!r}; roles: {', '.join(known)}")
        out[role] = alias.strip()
    return out


def prepare_task(task: str | None, task_file: Path | None, kernel: Path | None, out: Path) -> tuple[str, str, str, str | None]:
    """(task name, start source, start label, task file relative to the run dir): validated, no model needed."""
    from triforge.astra import lab
    from triforge.astra.task import get_task

    rel = None
    if task_file is not None:
        spec = lab.load_task_file(task_file)
        if task and task != spec.name:
            raise UserError(f"--task {task} differs from the task file's name {spec.name!r}; leave --task out")
        base = spec.baseline_path
        assert base is not None
        try:
            brel = base.resolve().relative_to(task_file.resolve().parent)
        except ValueError:
            raise UserError(f"task file {task_file}: its baseline {base} must be beside it or below it") from None
        dest = out / "task"
        for src, to in ((task_file, dest / task_file.name), (base, dest / brel)):
            if to.is_file() and to.read_bytes() != src.read_bytes():  # never overwrite another run's task
                raise UserError(f"run directory {out} holds a different {to.name}; use a new --out")
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, to)
        rel = f"task/{task_file.name}"
        spec = lab.load_task_file(out / rel)
        task = spec.name
    if not task:
        raise UserError("give --task NAME (see `triforge astra tasks`) or --task-file F.py")
    spec = get_task(task)
    if kernel is None:
        return task, spec.baseline_source(), "the task's baseline", rel
    source = read_user_text(kernel, "kernel file", "give the path of a .cu candidate")
    lab.check_kernel(spec, source, str(kernel))
    return task, source, str(kernel), rel


@contextlib.contextmanager
def open_models(roles: list[str], default: str | None, role_models: dict[str, str], base_url: str | None,
                api_key_env: str | None, cache_mode: str | None, out: Path):
    """The run opened in `out` (`core.run.open_run`) and a client per role: --role-model's alias, else --model's;
    one client per distinct alias. Yields (role -> client, role -> alias)."""
    from triforge.core.run import open_run

    with open_run(out, model=default, base_url=base_url, api_key_env=api_key_env, cache=cache_mode) as run:
        clients = {r: run.models(role_models.get(r)) for r in roles}
        yield clients, {r: c.alias for r, c in clients.items()}


def make_evaluator(evaluate_later: bool, gpus: int | None, executor: str = "local", ray_address: str | None = None):
    from triforge.astra.agents import Deferred, GpuPool

    if evaluate_later:
        return Deferred()
    if executor != "local" or ray_address:  # candidates as executor tasks, one GPU each (docs/executor.md)
        from triforge.astra.agents.executor_pool import ExecutorPool
        from triforge.executors.local import make_executor

        return ExecutorPool(make_executor(executor, address=ray_address), gpus)
    from triforge.astra.check_host import require_gpu

    require_gpu()
    return GpuPool(gpus)


def optimize(
    task: str = typer.Option(None, "--task", help="Task name (see `triforge astra tasks`)."),
    kernel: Path = typer.Option(None, "--kernel", help="Start from this kernel (candidate format) instead of the baseline."),
    task_file: Path = typer.Option(None, "--task-file", help="A Python file defining TASK (your own operator)."),
    model: str = ModelOpt,  # for every role
    role_model: list[str] = typer.Option(None, "--role-model", help="ROLE=ALIAS for one role (repeatable)."),
    base_url: str = BaseUrlOpt,
    api_key_env: str = KeyEnvOpt,
    rounds: int = typer.Option(5, "--rounds", min=1),
    candidates: int = typer.Option(3, "--candidates", "-k", min=1, help="Candidates per round (from different plans)."),
    repairs: int = typer.Option(1, "--repairs", min=0, help="Repairs per failing candidate (compile error, incorrect, crash)."),
    single_agent: bool = typer.Option(False, "--single-agent", help="One agent does every role (ablation)."),
    evaluate_later: bool = typer.Option(False, "--evaluate-later", help="Leave candidates for `triforge astra evaluate DIR`."),
    out: Path = typer.Option(None, "--out", help=DEFAULT_OUT_HELP),
    max_calls: int = MaxCallsOpt,
    max_input_tokens: int = typer.Option(None, "--max-input-tokens",
                                         help="Input tokens: no call starts once they are reached."),
    max_output_tokens: int = typer.Option(None, "--max-output-tokens",
                                          help="Output tokens: each call's max_tokens is cut to what is left."),
    max_usd: float = MaxUsdOpt,
    max_evaluations: int = typer.Option(None, "--max-evaluations", help="Hard limit on GPU evaluations (final check included)."),
    max_steps: int = typer.Option(12, "--max-steps", help="Steps per agent run."),
    profile: str = ProfileOpt,
    no_ncu: bool = typer.Option(False, "--no-ncu", help="Skip the ncu digest of correct candidates."),
    old_no_profile: bool = typer.Option(False, "--no-profile", hidden=True),  # the old name of --no-ncu
    gpus: int = typer.Option(None, "--gpus", help="Workers for local evaluation (default: one per visible GPU)."),
    cache: str = CacheOpt,
    executor: str = ExecutorOpt,
    ray_address: str = RayAddressOpt,
) -> None:
    """Make a kernel faster with the testing, profiling, planning and coding agents; the lab decides."""
    from triforge.astra.agents import ROLES, SINGLE, KernelOptimizeSettings, Optimizer
    from triforge.core.budget import BudgetLimits

    if max_evaluations is not None and max_evaluations < 3:
        raise UserError("--max-evaluations must be at least 3 (the start kernel and the final check take up to 3)")
    if profile not in ("default", "small-model"):
        raise UserError(f"--profile must be default or small-model, not {profile!r}")
    no_ncu = renamed(no_ncu, old_no_profile, "--no-ncu", "--no-profile", default=False)
    roles = [SINGLE] if single_agent else list(ROLES)
    rm = parse_role_models(role_model, single_agent)
    out = out or default_out(task or (task_file.stem if task_file else "astra"))
    make_run_dir(out)
    task_name, source, label, rel = prepare_task(task, task_file, kernel, out)
    argv = sys.argv[sys.argv.index("optimize") + 1:] if "optimize" in sys.argv else None
    (out / "command.txt").write_text(shlex.join(["triforge", "astra", "optimize", *argv]) + "\n" if argv is not None
                                     else "the same `triforge astra optimize` command\n")
    limits = BudgetLimits(max_calls=max_calls, max_input_tokens=max_input_tokens, max_output_tokens=max_output_tokens,
                          max_usd=max_usd, max_evaluations=max_evaluations)
    evaluator = (make_evaluator(evaluate_later, gpus) if executor == "local" and not ray_address
                 else make_evaluator(evaluate_later, gpus, executor, ray_address))
    try:
        with open_models(roles, model, rm, base_url, api_key_env, cache, out) as (models, aliases):
            settings = KernelOptimizeSettings(task_name, source, label, rounds, candidates, repairs, single_agent, rel,
                                        not no_ncu, aliases, max_steps, model_profile=profile)
            console.print(f"astra optimize [bold]{task_name}[/] from {label}: {rounds} round(s) x {candidates}, "
                          f"models {aliases}, run directory {out}")
            announce_isolation(getattr(evaluator, "isolation", None) or (
                "deferred: candidates run under `triforge astra evaluate`, and each result.json records what held"
                if evaluate_later else "held on the workers; each candidate's result.json records it"),
                what="candidate kernels")
            outcome = Optimizer(settings, models, evaluator, out, limits, on_event=lambda m: console.print(m, markup=False)).run()
    finally:
        evaluator.close()
    if outcome.status == "waiting":
        console.print(runnable(f"{len(outcome.waiting)} candidate(s) wait for evaluation: run `triforge astra evaluate {out}` "
                      f"on a GPU machine, then re-run this command ({out}/command.txt) to continue"),
                      markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_WAITING)
    final = outcome.results.get("final", {})
    console.print(f"best {outcome.best_id}: x{outcome.best_gain:.3f} over the start on the timing shapes; "
                  f"final check {final.get('verdict', '-')}", markup=False)
    for n in final.get("notes", []):
        console.print(f"note: {n}", markup=False)
    if outcome.stopped:
        console.print(f"stopped early: {outcome.stopped}", markup=False)
    console.print(f"reports: {out}/report.md, {out}/report.html, {out}/results.json")


def evaluate(
    run_dir: Path = typer.Argument(..., help="The run directory of `astra optimize --evaluate-later`."),
    gpus: int = typer.Option(None, "--gpus", help="Workers (default: one per visible GPU)."),
    executor: str = ExecutorOpt,
    ray_address: str = RayAddressOpt,
) -> None:
    """Evaluate every candidate waiting in RUN_DIR and write candidates/<id>/result.json."""
    from triforge.astra.agents.evaluator import evaluate_waiting, waiting_jobs

    if not (run_dir / "state.json").is_file():
        raise UserError(f"{run_dir} is not an astra optimize run directory (no state.json)")
    jobs = waiting_jobs(run_dir)
    if not jobs:
        console.print(f"nothing waits in {run_dir}")
        return
    for j in jobs:
        if j.task_file:
            from triforge.astra import lab

            lab.load_task_file(run_dir / j.task_file)
    evaluator = (make_evaluator(False, gpus) if executor == "local" and not ray_address
                 else make_evaluator(False, gpus, executor, ray_address))
    try:
        n = evaluate_waiting(run_dir, evaluator, lambda cid, r: console.print(f"{cid}: {r.get('verdict')}", markup=False))
    finally:
        evaluator.close()
    cmd = (run_dir / "command.txt").read_text().strip() if (run_dir / "command.txt").is_file() else "the optimize command"
    console.print(f"{n} of {len(jobs)} evaluated; continue with: {cmd}", markup=False)
