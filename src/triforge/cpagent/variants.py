"""Solving a reference model with extra constraints: finds sub-optimal or alternative solutions.

Used by the tests (planted sub-optimal submissions, alternatives to over-constrained references) and
handy when auditing a reference: "is there a solution with x[0] != 1?" is one call.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from triforge.cpagent import warm
from triforge.cpagent.dataset import Problem
from triforge.cpagent.overconstrained import relax_source
from triforge.cpagent.program_run import run_harness
from triforge.cpagent.refmodel import check_plan
from triforge.cpagent.refs import REF_JOBS, START_SLACK_S


def solve_variant(
    problem: Problem,
    instance: int = 0,
    extra: list[str] | None = None,
    *,
    relax: bool = False,
    solver: str = "ortools",
    time_limit: float = 30.0,
) -> dict[str, Any]:
    """Solve the reference model (optionally with its listed restrictions lifted) plus `extra` constraints.

    `extra` holds CPMpy expressions as source text over the reference's names; `{objective}` stands for
    the model's objective. Returns {"status", "values" (the output keys), "objective"}.
    """
    source = problem.instance_source(instance)
    if relax:
        source, _ = relax_source(problem.id, source)
    plan = check_plan(source, problem.output_keys)
    job = {"prefix": plan.prefix, "model_name": plan.model_name, "key_exprs": plan.key_exprs,
           "extra": list(extra or []), "solver": solver, "time_limit": time_limit}
    with tempfile.TemporaryDirectory(prefix="cpbench-variant-") as tmp:
        jp, rp = Path(tmp, "job.json"), Path(tmp, "result.json")
        jp.write_text(json.dumps(job))
        budget = time_limit + START_SLACK_S + 10
        if warm.enabled():
            w = warm.pool(REF_JOBS).run("variant", jp, rp, budget)
            err = w.stderr
        else:
            r = run_harness(sys.executable, REF_JOBS, "variant", jp, rp, timeout=budget, workdir=tmp)
            err = r.stderr
        if not rp.is_file():
            return {"status": "ERROR", "reason": (err.strip().splitlines() or ["?"])[-1]}
        return json.loads(rp.read_text())


def printed_suboptimal(problem: Problem, instance: int = 0, *, worse_than: float, time_limit: float = 30.0
                       ) -> str | None:
    """What the reference prints when its objective must be worse than `worse_than` (any reference, however it
    spells its output: the constraint is added at its `solve()` call); None when it printed nothing."""
    job = {"source": problem.instance_source(instance), "worse_than": worse_than}
    with tempfile.TemporaryDirectory(prefix="cpbench-variant-") as tmp:
        jp, rp = Path(tmp, "job.json"), Path(tmp, "result.json")
        jp.write_text(json.dumps(job))
        budget = time_limit + START_SLACK_S
        if warm.enabled():
            warm.pool(REF_JOBS).run("probe", jp, rp, budget)
        else:
            run_harness(sys.executable, REF_JOBS, "probe", jp, rp, timeout=budget, workdir=tmp)
        if not rp.is_file():
            return None
        return json.loads(rp.read_text()).get("stdout") or None
