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


def _serve(conn) -> None:
    conn.send({"ready": True})
    while True:
        try:
            job = conn.recv()
        except EOFError:
            os._exit(0)
        try:
            conn.send(handle(job))
        except Exception as exc:  # noqa: BLE001 - the context may be gone: report and leave
            from triforge.astra.evaluate import Fatal

            why = str(exc) if isinstance(exc, Fatal) else f"{type(exc).__name__}: {exc}"
            tb = "" if isinstance(exc, Fatal) else traceback.format_exc(limit=4)[-1500:]
            conn.send({"verdict": "crash", "reasons": [why] + ([tb] if tb else []), "fatal": True})
            os._exit(1)


def handle(job: dict[str, Any]) -> dict[str, Any]:
    kind = job["kind"]
    if kind in ("evaluate", "bench"):
        from triforge.astra import gpu

        gpu.ensure_context()
    if kind == "evaluate":
        from triforge.astra.evaluate import EvalOptions, evaluate

        return evaluate(job["task"], job["source"], EvalOptions(**job.get("options", {}))).to_dict()
    if kind == "bench":
        from triforge.astra.bench import bench_task

        return bench_task(job["task"], job.get("source"), **job.get("options", {}))
    if kind == "eval_python":  # tests: run a function by dotted name inside the worker
        mod, _, fn = job["target"].rpartition(".")
        return getattr(__import__(mod, fromlist=[fn]), fn)(**job.get("kwargs", {}))
    raise ValueError(f"unknown job kind {kind!r}")


class Worker:
    """A restartable worker process with a watchdog on every job."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, start_timeout: float = 180.0) -> None:
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.proc: Any = None
        self.conn: Any = None
        self.restarts = 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="astra-worker")
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(self.start_timeout):
            self.stop()
            raise RuntimeError("astra worker did not start in time")
        msg = parent.recv()
        if not msg.get("ready"):
            self.stop()
            raise RuntimeError(f"astra worker failed to start: {msg.get('reasons')}")

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
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
