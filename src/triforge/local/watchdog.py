"""Run a command and end it when the parent goes away: `python -m triforge.local.watchdog -- CMD ...`.

The parent holds the write end of this process's stdin and never writes. When the parent exits in
any way (normal exit, exception, Ctrl-C, SIGTERM, SIGKILL, OOM kill), the pipe closes, stdin reads EOF,
and the watchdog kills its whole process group (it is started as a session leader). If the command
exits by itself, the watchdog exits with its status.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

GRACE_S = 3.0


def _kill_group(grace_s: float, child: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command, give it `grace_s`, then SIGKILL the whole group (this process included).

    Runs in the watcher thread too, so it must not touch signal handlers (main thread only). A server may
    wait for its in-flight request on SIGTERM (uvicorn does), hence the SIGKILL after the grace period.
    """
    try:
        child.terminate()
        child.wait(grace_s)
    except (subprocess.TimeoutExpired, OSError):
        pass
    finally:
        try:
            os.killpg(os.getpgrp(), signal.SIGKILL)
        except ProcessLookupError:
            pass


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m triforge.local.watchdog -- CMD [ARGS...]", file=sys.stderr)
        return 2
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    done = threading.Event()

    def watch_parent() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        if not done.is_set():
            _kill_group(GRACE_S, child)

    def on_term(signum: int, frame: object) -> None:
        _kill_group(GRACE_S, child)

    signal.signal(signal.SIGTERM, on_term)
    threading.Thread(target=watch_parent, daemon=True).start()
    while child.poll() is None:
        time.sleep(0.2)
    done.set()
    return child.returncode if child.returncode >= 0 else 128 - child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
