"""The astra worker's entry: `python -m triforge.astra.worker_main HANDLER`, started confined by `Worker`.

Jobs arrive on stdin and replies leave on stdout, as `worker_wire` messages. Both pipes are moved
off fds 0 and 1 first: what a library prints, or a kernel's `printf`, goes to stderr and can never
be read back as a reply. Limits and confinement are the launcher's, applied before this starts.
"""

from __future__ import annotations

import os
import sys
import traceback

from triforge.astra import worker_wire
from triforge.astra.worker_wire import Fatal


def _take_pipes() -> tuple[int, int]:
    jobs, replies = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return jobs, replies


def serve(handler: str) -> None:
    jobs, replies = _take_pipes()
    mod, _, fn = handler.rpartition(".")
    try:
        handle_job = getattr(__import__(mod, fromlist=[fn]), fn)
    except Exception as exc:  # noqa: BLE001 - tell the parent why, then leave
        worker_wire.send(replies, {"ready": False,
                                   "reasons": [f"cannot load the job handler {handler}: {type(exc).__name__}: {exc}"]})
        os._exit(1)
    worker_wire.send(replies, {"ready": True, "pid": os.getpid()})
    while True:
        try:
            job = worker_wire.recv(jobs)
        except (EOFError, ValueError):
            os._exit(0)
        try:
            worker_wire.send(replies, handle_job(job))
        except Exception as exc:  # noqa: BLE001 - the context may be gone: report and leave
            why = str(exc) if isinstance(exc, Fatal) else f"{type(exc).__name__}: {exc}"
            tb = "" if isinstance(exc, Fatal) or isinstance(exc, MemoryError) else traceback.format_exc(limit=4)[-1500:]
            try:
                worker_wire.send(replies, {"verdict": "crash", "reasons": [why] + ([tb] if tb else []), "fatal": True})
            finally:
                os._exit(1)


if __name__ == "__main__":
    serve(sys.argv[1])
