"""Solve one problem with the cpagent into a run directory, and grade it when it is a CP-Bench problem.

`attempt` is cpagent's one evaluation path (agent run, then strict grading); `solve_task` puts an
attempt in a run directory that resumes only with the same settings (`triforge.core.provenance`).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from triforge.confine.isolation import IsolationPolicy
from triforge.confine.record import isolation_record, trace_isolation
from triforge.core import context
from triforge.core.budget import Budget
from triforge.core.llm import LLM
from triforge.core.provenance import guard_run_dir
from triforge.core.rundir import RunDir
from triforge.core.trace import Tracer
from triforge.cpagent.agent import CPAgentConfig, fresh_run, run_cpagent
from triforge.cpagent.run_settings import solve_fingerprint, task_hash
from triforge.cpagent.task import CPTask
from triforge.sandbox.kernel_sandbox import KernelSandbox
from triforge.ui.trace_view import render_html

# Statuses a resume does not redo. A budget stop, an endpoint failure or a harness error is not a result:
# those runs are done again when the directory is resumed.
FINAL = {"submitted", "limits_exceeded"}


def grade_solution(task: CPTask, program: Path, solver: str = "ortools",
                   fresh: dict[str, Any] | None = None, model_check: str = "sample") -> dict[str, Any]:
    """Strict verdicts of the submitted program on every instance of the problem.

    `fresh` is the submit-time fresh run (same sandbox and limits as the grader's); when the program,
    with instance 0's data put in, is the program that ran, its output is graded instead of a re-run.
    `model_check` is the grader's model-level check (off, sample: the first instance, full: every one).
    """
    from triforge.cpagent.grader import _program_for, grade_output, grade_program
    from triforge.cpagent.model_check import apply, check_model

    problem: Any = task.problem
    code = program.read_text(encoding="utf-8")
    instances = list(range(problem.n_instances))
    verdicts = []
    reuse = (fresh is not None and fresh.get("timeout_s", 0) <= problem.time_limit_s
             and _program_for(problem, code, 0) == code)
    if reuse:
        v0 = grade_output(problem, fresh["stdout"], 0, solver=solver)
        if model_check != "off" and v0.correct:
            apply(v0, check_model(problem, 0, code, v0.solution, mode=model_check))
        verdicts.append(v0)
        instances = instances[1:]
    if instances:
        rest = model_check if not reuse or model_check == "full" else "off"  # `sample`: instance 0 was it
        verdicts += grade_program(problem, program, instances=instances, solver=solver, model_check=rest)
    items = [v.to_json() if hasattr(v, "to_json") else asdict(v) for v in verdicts]
    correct = all(v.get("verdict") == "correct" for v in items)
    return {"status": "correct" if correct else "incorrect", "instances": items,
            "reasons": sorted({r for v in items if v.get("verdict") != "correct" for r in v.get("reasons", [])})}


def grade_code(task: CPTask, code: str, solver: str = "ortools", fresh: dict[str, Any] | None = None,
               model_check: str = "sample") -> dict[str, Any]:
    """`grade_solution` of program text."""
    with tempfile.TemporaryDirectory(prefix="triforge-grade-") as d:
        path = Path(d) / "solution.py"
        path.write_text(code, encoding="utf-8")
        return grade_solution(task, path, solver, fresh, model_check)


def attempt(task: CPTask, llm: LLM, *, config: CPAgentConfig | None = None, sandbox: KernelSandbox | None = None,
            run_dir: Path | None = None, grade: bool = True) -> dict[str, Any]:
    """Run the agent once on `task` and grade what it hands in. The record holds the agent's status and
    usage, `code` (when it submitted), `solution` and `grade`; a budget or endpoint stop is its status."""
    result, bound = run_cpagent(llm, task, config=config, run_dir=run_dir, sandbox=sandbox)
    record: dict[str, Any] = {"problem": task.id, "model": llm.alias, **result.summary(),
                              "fresh_checks_failed": sum(not f.ok for f in bound.fresh_checks)}
    if not result.submitted:
        record["grade"] = {"status": "not_submitted", "reasons": [f"{result.status}: {result.message}"]}
        return record
    code = result.output["code"]
    record["code"] = code
    record["auto_submitted"] = bool(result.output.get("auto"))
    fr = result.output.get("fresh_run")
    solution = fr["solution"] if fr else None
    if solution is None:  # the fresh check was off: run it once now, for solution.json
        fr2 = fresh_run(code, task)
        solution = fr2.solution if fr2.ok else None
        record["unchecked_submission_ok"] = fr2.ok
    record["solution"] = solution
    if not (grade and task.gradable):
        why = "no CP-Bench problem given (a plain problem file has no reference to grade against)"
        record["grade"] = {"status": "ungraded", "reasons": [why]}
    else:
        record["grade"] = grade_code(task, code, fresh=fr, model_check=(config or CPAgentConfig()).model_check)
    return record


def solve_task(
    task: CPTask,
    llm: LLM,
    out: str | Path,
    *,
    config: CPAgentConfig | None = None,
    sandbox: KernelSandbox | None = None,
    budget: Budget | None = None,
    grade: bool = True,
    resume: bool = True,
    fresh: bool = False,
) -> dict[str, Any]:
    """Run the agent on `task`, leave solution.py/solution.json/trace/report in `out`, return the record.

    A finished record in `out` is returned as it is when it was made with the same settings; other
    settings are refused (`StaleResults`); `fresh` moves earlier contents aside first.
    """
    config = config or CPAgentConfig()
    fp = solve_fingerprint(task, llm, config)
    rd = RunDir(out)
    moved = guard_run_dir(rd.path, fp, fresh=fresh)
    previous = rd.load_results()
    if resume and previous.get("status") in FINAL:
        return previous
    isolation = isolation_record(IsolationPolicy.from_env())  # how model-written code is confined here
    rd.write_config({"task": task.id, "model": {"alias": llm.alias, **llm.config.model_dump()},
                     **config.settings(), "settings_hash": fp.hash, "isolation": isolation})
    tracer = Tracer(rd.path)
    trace_isolation(tracer, isolation)
    with context.use(tracer=tracer, budget=budget):
        record = attempt(task, llm, config=config, sandbox=sandbox, run_dir=rd.path, grade=grade)
    code = record.pop("code", None)
    if code is not None:
        (rd.path / "solution.py").write_text(code, encoding="utf-8")
    if record.get("solution") is not None:
        (rd.path / "solution.json").write_text(json.dumps(record["solution"], indent=1), encoding="utf-8")
    record.update({**fp.stamp(), "item_hash": task_hash(task), "moved_aside": str(moved) if moved else None})
    rd.write_results(record)
    present = [f for f in ("solution.py", "solution.json") if (rd.path / f).is_file()]
    rd.write_report(report_md(task, {**record, "files": present}))
    render_html(rd.path)
    return record


def report_md(task: CPTask, r: dict[str, Any]) -> str:
    g = r.get("grade", {})
    lines = [
        f"# cpagent: {task.id}", "",
        f"- model: `{r['model']}`",
        f"- agent status: **{r['status']}** ({r['message']})",
        f"- grade: **{g.get('status')}**",
        f"- steps {r['steps']}, tokens {r['input_tokens']} in / {r['output_tokens']} out, "
        f"cost ${r['cost_usd']:.4f}, wall {r['wall_s']:.1f} s, format errors {r['format_errors']}, "
        f"rejected submissions {r['fresh_checks_failed']}",
    ]
    if g.get("status") == "ungraded":
        lines += ["", "This result could not be graded: " + "; ".join(g.get("reasons", []))]
    elif g.get("reasons"):
        lines += ["", "## Why not correct", *[f"- {x}" for x in g["reasons"][:20]]]
    for v in g.get("instances", []):
        lines.append(f"- instance {v.get('instance')}: {v.get('verdict')}")
    files = [f for f in ("solution.py", "solution.json") if f in r.get("files", ())]
    files += ["trace.jsonl", "trace.html", "cpagent.trajectory.json"]
    lines += ["", "Files: " + ", ".join(f"`{f}`" for f in files) + "."]
    return "\n".join(lines) + "\n"
