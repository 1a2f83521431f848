"""A forked child's report to its parent, as JSON through a pipe: the two halves that the dynamic reference check
(ref_jobs_probe.py) and the model capture (model_capture.py) share. Imports no triforge module: it runs beside
them in the grading harness's subprocess, where no file may be written."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from typing import Any, NoReturn


def read_report(pid: int, r: int, timeout: float) -> dict[str, Any]:
    """In the parent: read the child's report until it closes the pipe, killing it past `timeout` seconds."""
    deadline = time.perf_counter() + timeout
    chunks: list[bytes] = []
    while (left := deadline - time.perf_counter()) > 0:
        ready, _, _ = select.select([r], [], [], left)
        if ready:
            data = os.read(r, 1 << 16)
            if not data:
                break
            chunks.append(data)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    os.close(r)
    os.waitpid(pid, 0)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"error": f"no report within {timeout:g} s"}


def write_report(fd: int | None, rep: dict[str, Any]) -> NoReturn:
    """In the child: write the report and leave at once (no cleanup of the program's state runs)."""
    with contextlib.suppress(Exception):
        data = json.dumps(rep, default=str).encode()
        while data:
            data = data[os.write(fd, data):]  # type: ignore[arg-type]
    os._exit(0)
