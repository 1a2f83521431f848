"""Subprocess side of the model-level check; run as a script beside ref_jobs.py, it imports no triforge module.

    python model_jobs.py model JOB.json RESULT.json

The submitted program runs unchanged with every `solve()` / `solveAll()` (of a `Model` or a solver object)
observed. At a solve, the model the program built is captured (a `Model`'s constraints and objective, or
everything given to a solver object) and its distinct solutions are enumerated (for an objective: the
optimal ones); for each, a forked child lets that solve return the solution and lets the program print it,
so what is checked is what the program prints, projected on its output keys. The values the program reads
while printing tell which variables its output shows; enumeration blocks on those, so each new solution
prints differently. A program that solves again after a solve (an improvement loop, a second phase) is
let through that solve for real and captured at the next one: the model checked is that of the last solve.

The completeness side runs the dynamic check (ref_jobs_probe.py) on the program with the reference's
solution as candidate: the program's printed keys fixed to it, is its model still satisfiable?
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import signal
import sys
import time
from typing import Any


def run_capture(job: dict[str, Any]) -> dict[str, Any]:
    """Run the program with its solves observed; the enumeration at its last solve, or {"error": why}."""
    import cpmpy as cp
    from model_capture import SUB_FILE, Capture, _Stop  # beside this file, like ref_jobs_probe

    cap = Capture(job)
    cap.install(cp)
    ns: dict[str, Any] = {"__name__": "__main__"}
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(job["source"], SUB_FILE, "exec"), ns)
    except _Stop:
        pass
    except SystemExit as e:
        if cap.child is not None:
            cap._finish(None if e.code in (None, 0) else f"SystemExit: {e.code}")
        if not cap.result:
            return {"error": f"the program exited (code {e.code}) before its model was captured"}
    except BaseException as e:  # noqa: BLE001 - in a child the program's own error is its report
        if cap.child is not None:
            cap._finish(f"{type(e).__name__}: {e}")
        return {"error": f"the program failed while its model was captured: {type(e).__name__}: {e}"[:400]}
    if cap.child is not None:
        cap._finish()
    if cap.solves == 0:
        return {"error": "the program never called solve() or solveAll()"}
    if not cap.result:
        return {"error": "no model captured"}
    if cap.result.get("empty"):
        status = cap.result.get("objective_status", "UNKNOWN")
        kind = "optimal solution" if cap.result.get("has_objective") else "solution"
        return {"error": f"the model of the program's last solve() gave no {kind} within "
                f"{job.get('time_limit', 10):g} s ({status})"}
    return cap.result


def _in_child(fn: Any, timeout: float) -> dict[str, Any]:
    """`fn()` in a forked child with its own deadline; its JSON result, or {"error": ...}."""
    r, w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setpgid(0, 0)
        try:
            res = fn()
        except BaseException as e:  # noqa: BLE001
            res = {"error": f"{type(e).__name__}: {e}"[:400]}
        data = json.dumps(res, default=str).encode()
        with contextlib.suppress(Exception):
            while data:
                data = data[os.write(w, data):]
        os._exit(0)
    os.close(w)
    deadline = time.perf_counter() + timeout
    chunks: list[bytes] = []
    timed_out = True
    while (left := deadline - time.perf_counter()) > 0:
        ready, _, _ = select.select([r], [], [], left)
        if ready:
            data = os.read(r, 1 << 16)
            if not data:
                timed_out = False
                break
            chunks.append(data)
    if timed_out:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    os.close(r)
    os.waitpid(pid, 0)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"error": f"no result within {timeout:g} s" if timed_out else "the check died without a result"}


def run_model(job: dict[str, Any]) -> dict[str, Any]:
    """Soundness (the enumeration) and, when the job holds the reference's solution, completeness."""
    import cpmpy  # noqa: F401 - imported once, before the forks

    if job.get("memory_bytes"):  # the graded run's address-space limit (a warm server's child has none)
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (int(job["memory_bytes"]), int(job["memory_bytes"])))
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    out["soundness"] = _in_child(lambda: run_capture(job), float(job.get("sound_budget", 60.0)))
    out["sound_s"] = time.perf_counter() - t0
    if job.get("candidates"):
        from ref_jobs_probe import run_probe

        probe_job = {"source": job["source"], "candidates": job["candidates"], "time_limit": job.get("time_limit"),
                     "optimum": job.get("optimum")}
        t1 = time.perf_counter()
        out["completeness"] = _in_child(lambda: run_probe(probe_job), float(job.get("complete_budget", 60.0)))
        out["complete_s"] = time.perf_counter() - t1
    return out


def main(argv: list[str]) -> int:
    mode, job_path, result_path = argv[1:4]
    if mode != "model":
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return 2
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    result = run_model(job)
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
