"""`triforge maestro optimize` and `triforge maestro compare`: run optimizers on a benchmark's splits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from triforge.cli.common import (
    DEFAULT_OUT_HELP,
    INPUT,
    LIMITS,
    MODEL,
    RUN_DIR,
    BaseUrlOpt,
    ExecutorOpt,
    KeyEnvOpt,
    ModelOpt,
    RayAddressOpt,
    console,
    default_out,
    fan_out,
    renamed,
)
from triforge.cli.isolation_line import announce_isolation
from triforge.core.errors import UserError

ProgramOpt = typer.Option(None, "--program", "-p", rich_help_panel=INPUT, help="Seed name, a .json/.toml program, or module:function "
                                                       "(default: the benchmark's seed).")
BenchOpt = typer.Option(..., "--bench", "-b", help="hotpotqa, ifbench or cpbench.")
ReflOpt = typer.Option(None, "--reflection-model", rich_help_panel=MODEL, help="Alias of the reflection model (default: --model).")
RolloutsOpt = typer.Option(None, "--max-rollouts", min=1, rich_help_panel=LIMITS,
                           help="Rollouts of the search (one program run on one example), train + val; required. "
                                "The final test evaluation runs apart: the seed and the best program on the test "
                                "split.")
OldBudgetOpt = typer.Option(None, "--budget", min=1, hidden=True)  # the old name of --max-rollouts
CallsOpt = typer.Option(None, "--max-calls", min=1, rich_help_panel=LIMITS,
                        help="LLM calls of every kind the command sends, the final test evaluation's included: "
                             "the search stops early enough to leave the test evaluation the calls it is "
                             "expected to need.")
SeedOpt = typer.Option(0, "--seed", help="Seed of the search (splits stay the benchmark's).")
DataOpt = typer.Option(None, "--data", help="Benchmark data (see `maestro run`).")
CorpusOpt = typer.Option(None, "--corpus", help="HotpotQA abstracts as JSONL.")
ModeOpt = typer.Option("strict", "--mode", help="IFBench scoring: strict or loose.")
LimitsOpt = typer.Option(None, "--limits", help="TRAIN,VAL,TEST: use only the first N examples of each split.")
MinibatchOpt = typer.Option(4, "--minibatch", min=1, help="Examples per paired minibatch comparison.")
PatienceOpt = typer.Option(None, "--patience", min=1, help="Stop after N proposals without a better best.")
WallOpt = typer.Option(None, "--max-wall-s", min=1.0, help="Stop the search after this many seconds.")
ModelsOpt = typer.Option(None, "--module-models", help="Comma-separated aliases a module may be given (cost-aware).")
ToolOpt = typer.Option(None, "--tool", help="module:function the graph step may add as a tool (repeatable).")
ValidatorOpt = typer.Option(None, "--validator", help="module:function the graph step may add as a check (repeatable).")
JobsOpt = typer.Option(8, "--jobs", min=1, help="Rollouts in parallel.")
CacheOpt = typer.Option("rw", "--cache", rich_help_panel=RUN_DIR, help="Response cache in the run directory: off, rw or replay (rw resumes).")


def _max_rollouts(max_rollouts: int | None, old_budget: int | None) -> int:
    n = renamed(max_rollouts, old_budget, "--max-rollouts", "--budget")
    if n is None:
        raise UserError("give --max-rollouts N: the rollouts the search may run (train + val)")
    return n


def _fn_doc(ref: str) -> str:
    from triforge.maestro.interpreter import NodeError, resolve_fn

    try:
        fn = resolve_fn(ref)
    except NodeError as e:
        raise UserError(f"--tool/--validator {ref}: {e}") from None
    return (fn.__doc__ or ref).strip().splitlines()[0]


def _task(bench: str, program: str | None, data: str | None, corpus: str | None, mode: str, limits: str | None) -> Any:
    from triforge.maestro.bench import open_benchmark
    from triforge.maestro.optimize.runner import Task
    from triforge.maestro.programs import load_program

    b = open_benchmark(bench, data=data, corpus=corpus, mode=mode)
    prog = b.seed_program() if program is None else load_program(program)
    splits = [b.examples(s) for s in ("train", "val", "test")]
    if limits:
        try:
            ns = [int(x) for x in limits.split(",")]
            if len(ns) != 3 or min(ns) < 1:
                raise ValueError
        except ValueError:
            raise UserError(f"--limits must be three positive numbers TRAIN,VAL,TEST, not {limits!r}") from None
        splits = [s[:n] for s, n in zip(splits, ns, strict=True)]
    return Task(bench, prog, *splits, metric=b.metric, retrievers=b.retrievers())


def _settings(budget: int, max_calls: int | None, seed: int, minibatch: int, patience: int | None,
              max_wall_s: float | None, module_models: str | None, tools: list[str] | None,
              validators: list[str] | None, out: Path) -> Any:
    from triforge.maestro.optimize.state import ProgramOptimizeSettings

    return ProgramOptimizeSettings(budget=budget, max_calls=max_calls, seed=seed, minibatch=minibatch, patience=patience,
                            max_wall_s=max_wall_s, stop_file=out / "STOP",
                            models=[m.strip() for m in (module_models or "").split(",") if m.strip()],
                            tools={t: _fn_doc(t) for t in tools or []},
                            validators={v: _fn_doc(v) for v in validators or []})


def _progress(budget: int) -> Any:
    def show(prop: Any, ledger: Any, best: float) -> None:
        sp = ledger.spent()
        val = f" val {prop.val_score:.3f}" if prop.val_score is not None else ""
        console.print(f"[{prop.index:>3}] {prop.step:<6} {prop.move:<11} {prop.module or '':<16} "
                      f"{prop.verdict[:60]}{val} | rollouts {sp.rollouts}/{budget} calls {sp.calls} "
                      f"best {best:.3f}", highlight=False, soft_wrap=True, markup=False)
    return show


class _FinalTest:
    """Progress of the final test evaluation (seed and best program on the test split): minutes with a slow
    model, and silent before this."""

    def __init__(self, n_test: int) -> None:
        self.total, self.progress = 2 * n_test, None

    def __call__(self, which: str, result: Any) -> None:
        from triforge.ui.progress import Progress

        if self.progress is None:
            self.progress = Progress("maestro final test", total=self.total, unit="rollout").start()
        if result is None:
            self.progress.set(phase=f"{which} program")
        else:
            self.progress.advance(last=f"{result.example_id} score {result.score:.2f}")

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()


def _run_one(optimizer: str, task: Any, model: str | None, base_url: str | None, api_key_env: str | None,
             reflection_model: str | None, settings: Any, out: Path, cache: str, jobs: int) -> dict[str, Any]:
    from triforge.core.run import open_run
    from triforge.maestro.optimize.runner import optimize

    final = _FinalTest(len(task.test))
    # the response cache lives in the run directory: a re-run of the same command replays from it
    try:
        with open_run(out, model=model, base_url=base_url, api_key_env=api_key_env, cache=cache,
                      cache_path=out / "cache.sqlite") as run:
            reflection = run.models(reflection_model)
            described = {"task": [run.model.alias, run.model.config.model, run.model.config.base_url],
                         "reflection": [reflection.alias, reflection.config.model, reflection.config.base_url]}
            return optimize(optimizer, task, run.models, reflection, settings, out, describe_models=described,
                            jobs=jobs, progress=_progress(settings.budget), on_test=final)
    finally:
        final.close()


def _line(s: dict[str, Any]) -> str:
    sp = s["spent"]
    return (f"{s['optimizer']}: test {s['test_seed']:.3f} -> {s['test_best']:.3f}, val {s['best_val']:.3f}; rollouts "
            f"train {sp['rollouts']['train']} / total {sp['search_rollouts']}; calls {sp['calls']['task']}+"
            f"{sp['calls']['reflection']}; stop: {s['stop_reason']}"
            + (f"; the final test evaluation was stopped by the call cap ({s['n_test_seed']} / {s['n_test_best']} of "
               f"{s['n_test']} examples scored)" if s.get("test_stop") else ""))


def optimize_cmd(
    program: str = ProgramOpt, bench: str = BenchOpt, model: str = ModelOpt, base_url: str = BaseUrlOpt,
    api_key_env: str = KeyEnvOpt, reflection_model: str = ReflOpt, max_rollouts: int = RolloutsOpt,
    max_calls: int = CallsOpt, old_budget: int = OldBudgetOpt,
    optimizer: str = typer.Option("maestro", "--optimizer", help="maestro, config-only, gepa or mipro."),
    seed: int = SeedOpt, out: Path = typer.Option(None, "--out", help=DEFAULT_OUT_HELP),
    data: str = DataOpt, corpus: str = CorpusOpt, mode: str = ModeOpt, limits: str = LimitsOpt,
    minibatch: int = MinibatchOpt, patience: int = PatienceOpt, max_wall_s: float = WallOpt,
    module_models: str = ModelsOpt, tool: list[str] = ToolOpt, validator: list[str] = ValidatorOpt,
    jobs: int = JobsOpt, cache: str = CacheOpt, executor: str = ExecutorOpt, ray_address: str = RayAddressOpt,
) -> None:
    """Optimize a program on a benchmark under one budget; writes the run directory (report.md, report.html, ...)."""
    from triforge.maestro.bench import benchmark_class
    from triforge.maestro.optimize.runner import OPTIMIZERS

    if optimizer not in OPTIMIZERS:
        raise UserError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    benchmark_class(bench)
    budget = _max_rollouts(max_rollouts, old_budget)
    task = _task(bench, program, data, corpus, mode, limits)
    out = out or default_out(f"{bench}-{optimizer}")
    if bench == "cpbench":
        announce_isolation()
    settings = _settings(budget, max_calls, seed, minibatch, patience, max_wall_s, module_models, tool, validator, out)
    with fan_out(executor, ray_address):
        s = _run_one(optimizer, task, model, base_url, api_key_env, reflection_model, settings, out, cache, jobs)
    console.print(_line(s), highlight=False, soft_wrap=True)
    console.print(f"run directory: {out} (report.md, report.html, best_program.json, proposals.jsonl)")


def compare_cmd(
    optimizers: str = typer.Option("maestro,config-only,gepa,mipro", "--optimizers",
                                   help="Comma-separated optimizers, run on the same splits, model, budget, seed."),
    program: str = ProgramOpt, bench: str = BenchOpt, model: str = ModelOpt, base_url: str = BaseUrlOpt,
    api_key_env: str = KeyEnvOpt, reflection_model: str = ReflOpt, max_rollouts: int = RolloutsOpt,
    max_calls: int = CallsOpt, old_budget: int = OldBudgetOpt, seed: int = SeedOpt,
    out: Path = typer.Option(None, "--out", help="Folder: one run directory per optimizer, and compare.md "
                                                 "(default: runs/BENCH-compare-YYYYmmdd-HHMMSS)."),
    data: str = DataOpt, corpus: str = CorpusOpt, mode: str = ModeOpt, limits: str = LimitsOpt,
    minibatch: int = MinibatchOpt, patience: int = PatienceOpt, max_wall_s: float = WallOpt,
    module_models: str = ModelsOpt, tool: list[str] = ToolOpt, validator: list[str] = ValidatorOpt,
    jobs: int = JobsOpt, cache: str = CacheOpt, executor: str = ExecutorOpt, ray_address: str = RayAddressOpt,
) -> None:
    """Run several optimizers side by side and print one table."""
    from triforge.core.rundir import write_json_atomic
    from triforge.maestro.bench import benchmark_class
    from triforge.maestro.optimize.runner import OPTIMIZERS

    names = [o.strip() for o in optimizers.split(",") if o.strip()]
    bad = [o for o in names if o not in OPTIMIZERS]
    if bad or not names:
        raise UserError(f"unknown optimizer(s) {bad or optimizers!r}: use some of {', '.join(OPTIMIZERS)}")
    benchmark_class(bench)
    budget = _max_rollouts(max_rollouts, old_budget)
    task = _task(bench, program, data, corpus, mode, limits)
    out = out or default_out(f"{bench}-compare")
    if bench == "cpbench":
        announce_isolation()
    rows = []
    with fan_out(executor, ray_address):
        for name in names:
            console.print(f"[bold]{name}[/]")
            settings = _settings(budget, max_calls, seed, minibatch, patience, max_wall_s, module_models, tool,
                                 validator, out / name)
            rows.append(_run_one(name, task, model, base_url, api_key_env, reflection_model, settings, out / name,
                                 cache, jobs))
    table = compare_table(rows)
    (out / "compare.md").write_text(table, encoding="utf-8")
    write_json_atomic(out / "compare.json", rows)
    console.print(table, highlight=False, markup=False)


def compare_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| optimizer | test (seed -> best) | val | rollouts train / total | LLM calls | tokens in / out | USD | "
             "wall s | stop |", "|---|---|---|---|---|---|---|---|---|"]
    for s in rows:
        sp = s["spent"]
        lines.append(f"| {s['optimizer_label']} | {s['test_seed']:.3f} -> {s['test_best']:.3f} | {s['best_val']:.3f} | "
                     f"{sp['rollouts']['train']} / {sp['search_rollouts']} | {sp['calls']['task'] + sp['calls']['reflection']}"
                     f" | {sp['input_tokens']} / {sp['output_tokens']} | {sp['usd']:.4f} | {s['wall_s']:.1f} | "
                     f"{s['stop_reason']} |")
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize_cmd)
    app.command("compare")(compare_cmd)

