"""Evaluate a program on a benchmark split into a run directory (what `triforge maestro run` does).

The directory holds `config.json`, `program.json` (the program as evaluated), `results.jsonl` (one
line per example: outputs, score, feedback, trace; the resume store), `results.json` (summary and
per-example scores), `report.md`, and `trace.jsonl` when a tracer is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from triforge.core.rundir import RunDir
from triforge.maestro.bench import open_benchmark
from triforge.maestro.evaluate import EvalReport, ExampleResult, ResultStore, evaluate
from triforge.maestro.executor import Models
from triforge.maestro.program import Program


def _describe_models(models: Models) -> dict[str, Any]:
    llm = getattr(models, "default", models)
    cfg = getattr(llm, "config", None)
    return {"alias": getattr(llm, "alias", None), "model": getattr(cfg, "model", None),
            "base_url": getattr(cfg, "base_url", None)}


def evaluate_to_dir(program: str | Program | None, bench: str, split: str, models: Models, out: str | Path, *,
                    data: str | None = None, corpus: str | None = None, mode: str = "strict",
                    limit: int | None = None, jobs: int | None = None, samples: int = 1,
                    on_start: Callable[[int], None] | None = None,
                    on_result: Callable[[ExampleResult], None] | None = None) -> dict[str, Any]:
    from triforge.maestro.programs import load_program

    benchmark = open_benchmark(bench, data=data, corpus=corpus, mode=mode)
    prog = benchmark.seed_program() if program is None else (
        program if isinstance(program, Program) else load_program(program))
    examples = benchmark.examples(split)
    if limit is not None:
        examples = examples[:limit]
    jobs = jobs or benchmark.default_jobs
    rd = RunDir(out)
    rd.write_config({"bench": bench, "split": split, "data": data, "corpus": corpus, "mode": mode,
                     "limit": limit, "jobs": jobs, "samples": samples, "program": prog.name,
                     "program_hash": prog.hash, "model": _describe_models(models)})
    prog.save(rd.path / "program.json")
    store = ResultStore(rd.path / "results.jsonl")
    if on_start is not None:
        on_start(len(examples) * samples)
    report = evaluate(prog, examples, benchmark.metric, models, retrievers=benchmark.retrievers(), jobs=jobs,
                      samples=samples, store=store, on_result=on_result)
    summary = {"bench": bench, "split": split, **report.summary()}
    rd.write_results({"summary": summary, "examples": [
        {"id": r.example_id, "sample": r.sample, "score": r.score, "error": r.error} for r in report.results]})
    rd.write_report(report_md(prog, summary, report))
    return summary


def report_md(program: Program, summary: dict[str, Any], report: EvalReport) -> str:
    lines = [f"# maestro run: {program.name} on {summary['bench']} / {summary['split']}", "",
             f"- program hash `{program.hash}`",
             f"- mean score **{summary['mean_score']:.3f}** over {summary['n']} run(s)",
             f"- errors: {summary['errors'] or 'none'}; from earlier runs: {summary['cached']}",
             f"- wall {summary['wall_s']:.1f} s", "", "| example | sample | score | feedback |", "|---|---|---|---|"]
    for r in report.results:
        fb = r.feedback.replace("\n", " ").replace("|", "\\|")
        lines.append(f"| {r.example_id} | {r.sample} | {r.score:.2f} | {fb[:160]} |")
    return "\n".join(lines) + "\n"
