"""Evaluate a program on a benchmark split into a run directory (what `triforge maestro run` does).

The directory holds `config.json`, `program.json` (the program as evaluated), `results.jsonl` (one
line per example: outputs, score, feedback, trace; the resume store), `results.json` (summary and
per-example scores), `report.md`, `provenance.json` (the settings the results were made with), and
`trace.jsonl` when a tracer is installed. Re-running into the directory resumes only with the same
settings; otherwise it refuses (`fresh=True` moves the earlier contents aside).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from triforge.core.provenance import (
    Fingerprint,
    file_hash,
    guard_run_dir,
    model_settings,
    refuse_stale_items,
    stale_items,
)
from triforge.core.rundir import RunDir
from triforge.maestro.bench import Benchmark, open_benchmark
from triforge.maestro.evaluate import EvalReport, ExampleResult, ResultStore, evaluate, example_hash
from triforge.maestro.interpreter import Models, model_for
from triforge.maestro.program import Program


def _describe_models(models: Models) -> dict[str, Any]:
    llm = getattr(models, "default", models)
    cfg = getattr(llm, "config", None)
    return {"alias": getattr(llm, "alias", None), "model": getattr(cfg, "model", None),
            "base_url": getattr(cfg, "base_url", None)}


def models_used(program: Program, models: Models) -> dict[str, Any]:
    """The reply-changing settings of the default model and of every alias a node names."""
    aliases = sorted({a for n in program.nodes if (a := getattr(n, "model", None))})
    return {alias or "(default)": model_settings(model_for(models, alias)) for alias in [None, *aliases]}


def settings_fingerprint(program: Program, benchmark: Benchmark, models: Models, *, bench: str,
                         data: str | None, corpus: str | None, mode: str) -> Fingerprint:
    """Everything besides the program and the example that can change a result of this run.

    The program and the example content are part of each row's key (program hash, item hash), so other
    programs and splits share a directory; models, endpoint, decoding, data, corpus and scoring do not.
    """
    sources = getattr(benchmark, "settings", dict)()  # e.g. HotpotQA's corpus, also when set by environment
    return Fingerprint.of(kind="maestro run", bench=bench, mode=mode, data=data, sources=sources,
                          corpus={"path": corpus, "hash": file_hash(corpus)}, models=models_used(program, models))


def evaluate_to_dir(program: str | Program | None, bench: str, split: str, models: Models, out: str | Path, *,
                    data: str | None = None, corpus: str | None = None, mode: str = "strict",
                    limit: int | None = None, jobs: int | None = None, samples: int = 1, fresh: bool = False,
                    on_start: Callable[[int], None] | None = None,
                    on_result: Callable[[ExampleResult], None] | None = None,
                    on_data: Callable[[str], None] | None = None) -> dict[str, Any]:
    """`on_data` hears which data set the run reads and its size (one line), before anything runs."""
    from triforge.maestro.programs import load_program

    benchmark = open_benchmark(bench, data=data, corpus=corpus, mode=mode)
    prog = benchmark.seed_program() if program is None else (
        program if isinstance(program, Program) else load_program(program))
    examples = benchmark.examples(split)
    data_set = describe_data(bench, data, benchmark, split, len(examples))
    if on_data is not None:
        on_data(data_set)
    if limit is not None:
        examples = examples[:limit]
    jobs = jobs or benchmark.default_jobs
    fp = settings_fingerprint(prog, benchmark, models, bench=bench, data=data, corpus=corpus, mode=mode)
    rd = RunDir(out)
    moved = guard_run_dir(rd.path, fp, fresh=fresh)
    store = ResultStore(rd.path / "results.jsonl", stamp=fp.stamp())
    hash_example = getattr(benchmark, "example_hash", example_hash)
    current = {ex.id: hash_example(ex) for ex in examples}
    refuse_stale_items(rd.path, stale_items(
        {r.example_id: r.item_hash for r in store.rows() if r.program_hash == prog.hash}, current))
    rd.write_config({"bench": bench, "split": split, "data": data, "corpus": corpus, "mode": mode,
                     "limit": limit, "jobs": jobs, "samples": samples, "program": prog.name,
                     "program_hash": prog.hash, "model": _describe_models(models), "settings_hash": fp.hash})
    prog.save(rd.path / "program.json")
    if on_start is not None:
        on_start(len(examples) * samples)
    report = evaluate(prog, examples, benchmark.metric, models, retrievers=benchmark.retrievers(), jobs=jobs,
                      samples=samples, store=store, on_result=on_result, hash_example=lambda ex: current[ex.id])
    summary = {"bench": bench, "split": split, "data_set": data_set, **report.summary(), **fp.stamp(),
               "moved_aside": str(moved) if moved else None}
    rd.write_results({"summary": summary, "examples": [
        {"id": r.example_id, "sample": r.sample, "score": r.score, "error": r.error, "item_hash": r.item_hash,
         "settings_hash": fp.hash, "commit": r.commit or fp.stamp()["commit"]} for r in report.results]})
    rd.write_report(report_md(prog, summary, report))
    return summary


def describe_data(bench: str, data: str | None, benchmark: Benchmark, split: str, n_split: int) -> str:
    """Which data set a run reads and how big it is, e.g. `hotpotqa-mini (bundled): 20 examples; split test: 6`."""
    from triforge.core.errors import UserError

    try:
        from triforge.data import lookup

        ds = lookup(data, bench)
    except (ImportError, KeyError, UserError):
        ds = None
    name = (f"{ds.name} (bundled)" if ds.bundled else ds.name) if ds is not None else str(data or "default")
    try:
        total = len(benchmark.examples("all"))
    except (UserError, ValueError, KeyError):
        total = None
    size = f"{total} examples; " if total is not None else ""
    return f"{name}: {size}split {split}: {n_split}"


def report_md(program: Program, summary: dict[str, Any], report: EvalReport) -> str:
    lines = [f"# maestro run: {program.name} on {summary['bench']} / {summary['split']}", "",
             f"- data: {summary.get('data_set') or 'not recorded'}",
             f"- program hash `{program.hash}`",
             f"- mean score **{summary['mean_score']:.3f}** over {summary['n']} run(s)",
             f"- errors: {summary['errors'] or 'none'}; from earlier runs: {summary['cached']}",
             f"- wall {summary['wall_s']:.1f} s", "", "| example | sample | score | feedback |", "|---|---|---|---|"]
    for r in report.results:
        fb = r.feedback.replace("\n", " ").replace("|", "\\|")
        lines.append(f"| {r.example_id} | {r.sample} | {r.score:.2f} | {fb[:160]} |")
    return "\n".join(lines) + "\n"
