"""Functions the worker tests run inside the worker process (no GPU needed)."""

from __future__ import annotations

import os
import time
import uuid

INSTANCE = uuid.uuid4().hex  # one per worker process (PIDs repeat: each worker has its own PID namespace)


def ok(value: int = 1) -> dict:
    return {"verdict": "correct", "value": value, "pid": os.getpid(), "instance": INSTANCE}


def die() -> dict:
    os._exit(3)


def hang() -> dict:
    time.sleep(3600)
    return {}


def spin_past_the_compile_bound(seconds: int = 1) -> dict:
    """What a compile bomb does to the worker, without NVRTC: CPU time past `compile.cpu_bound`."""
    from triforge.astra.compile import cpu_bound

    with cpu_bound(seconds):
        while True:
            pass


def boom() -> dict:
    raise ValueError("planted failure")


def handle(job: dict) -> dict:
    """The worker's job handler in the worker tests: runs the function of this module that the job names."""
    return globals()[job["kind"]](**job.get("kwargs", {}))
