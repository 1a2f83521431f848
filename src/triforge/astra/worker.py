"""The worker process: candidates run here, never in the harness.

An illegal memory access, a crash or a hang (watchdog) ends the worker and yields verdict `crash`;
the next job gets a fresh worker. The parent only sends plain dicts and receives plain dicts.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import traceback
from typing import Any

DEFAULT_TIMEOUT = 300.0


class WorkerStartError(RuntimeError):
    """The worker process could not be started; the message says why."""


def _serve(conn, handler: str = "triforge.astra.worker.handle") -> None:
    mod, _, fn = handler.rpartition(".")
    try:
        handle_job = getattr(__import__(mod, fromlist=[fn]), fn)
    except Exception as exc:  # noqa: BLE001 - tell the parent why, then leave
        conn.send({"ready": False, "reasons": [f"cannot load the job handler {handler}: {type(exc).__name__}: {exc}"]})
        os._exit(1)
    conn.send({"ready": True})
    while True:
        try:
            job = conn.recv()
        except EOFError:
            os._exit(0)
        try:
            conn.send(handle_job(job))
        except Exception as exc:  # noqa: BLE001 - the context may be gone: report and leave
            from triforge.astra.evaluate import Fatal

            why = str(exc) if isinstance(exc, Fatal) else f"{type(exc).__name__}: {exc}"
            tb = "" if isinstance(exc, Fatal) else traceback.format_exc(limit=4)[-1500:]
            conn.send({"verdict": "crash", "reasons": [why] + ([tb] if tb else []), "fatal": True})
            os._exit(1)


def handle(job: dict[str, Any]) -> dict[str, Any]:
    kind = job["kind"]
    if kind in ("evaluate", "bench", "lab_evaluate"):
        from triforge.astra import gpu

        gpu.ensure_context()
    if kind == "evaluate":
        from triforge.astra.evaluate import EvalOptions, evaluate

        return evaluate(job["task"], job["source"], EvalOptions(**job.get("options", {}))).to_dict()
    if kind == "lab_evaluate":  # the agents' lab: a task variant (user file, extra shapes), then evaluate
        from triforge.astra.lab import evaluate_in_worker

        return evaluate_in_worker(**job.get("kwargs", {}))
    if kind == "bench":
        from triforge.astra.bench import bench_task

        return bench_task(job["task"], job.get("source"), **job.get("options", {}))
    raise ValueError(f"unknown job kind {kind!r}")


class Worker:
    """A restartable worker process with a watchdog on every job.

    `handler`: dotted name of the function that answers a job dict inside the worker (the lab's
    `handle` by default; tests pass their own to exercise crash handling)."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, start_timeout: float = 180.0,
                 handler: str = "triforge.astra.worker.handle") -> None:
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.handler = handler
        self.proc: Any = None
        self.conn: Any = None
        self.restarts = 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.handler), daemon=True, name="astra-worker")
        self.conn = parent
        try:
            self.proc.start()
        except Exception as exc:  # noqa: BLE001 - the cause, not a follow-up error, is what the user needs
            self.stop()
            raise WorkerStartError(f"astra worker could not be started: {type(exc).__name__}: {exc}") from exc
        finally:
            child.close()
        try:
            ready = parent.poll(self.start_timeout)
            msg = parent.recv() if ready else None
        except (EOFError, OSError):
            code = self.proc.exitcode if self.proc is not None else None
            self.stop()
            raise WorkerStartError(f"astra worker exited during start (exit code {code}); its error output "
                                   "above says why") from None
        if msg is None:
            self.stop()
            raise WorkerStartError(f"astra worker did not start within {self.start_timeout:.0f} s")
        if not msg.get("ready"):
            self.stop()
            raise WorkerStartError(f"astra worker failed to start: {'; '.join(msg.get('reasons') or [])}")

    def stop(self) -> None:
        if self.proc is not None:
            started = self.proc.pid is not None
            if started and self.proc.is_alive():
                self.proc.kill()
            if started:
                self.proc.join(10)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def call(self, job: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        if not self.alive():
            if self.proc is not None:
                self.stop()
                self.restarts += 1
            self.start()
        limit = timeout or self.timeout
        try:
            self.conn.send(job)
            if not self.conn.poll(limit):
                self.stop()
                return {"verdict": "crash", "reasons": [f"watchdog: no answer within {limit:.0f} s (a hang)"], "fatal": True}
            msg = self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            code = self.proc.exitcode if self.proc is not None else None
            self.stop()
            return {"verdict": "crash", "reasons": [f"worker died (exit code {code})"], "fatal": True}
        if msg.get("fatal"):
            self.stop()
        return msg

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
