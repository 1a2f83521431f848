"""The llama.cpp server as a child process with a guaranteed end.

`LocalServer` starts a command (by default `python -m llama_cpp.server ...`) on a free loopback port in
its own process group, waits until `GET /v1/models` answers, and kills the whole group on `stop()`,
on leaving a `with` block (also on Ctrl-C and errors), at interpreter exit, and, through
`triforge.local.watchdog`, when this process dies without cleaning up (SIGTERM, SIGKILL, OOM).
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from triforge.local.install import LocalModelError
from triforge.local.llama_build import missing_llama_modules, server_env
from triforge.local.paths import local_dir

HOST = "127.0.0.1"
MODEL_ALIAS = "local"


NATIVE_CHAT_FORMAT = "chatml-function-calling"


def tool_mode() -> str:
    """How the `local` alias calls tools: `text` (default) or `native` (TRIFORGE_LOCAL_TOOLS).

    Text mode serves the GGUF's own chat template and uses triforge's text tool protocol with a cap per
    reply. Native mode serves llama-cpp-python's `chatml-function-calling` format, which (0.3.36) HTML-escapes
    every message of the prompt (`<` becomes `&lt;`, `"` becomes `&#34;`; the model then writes escaped
    text back) and ignores max_tokens in tool calls. See docs/endpoints.md.
    """
    raw = os.environ.get("TRIFORGE_LOCAL_TOOLS", "text").strip().lower() or "text"
    if raw not in ("text", "native"):
        raise LocalModelError(f"TRIFORGE_LOCAL_TOOLS={raw!r}: use text or native")
    return raw


def default_chat_format() -> str | None:
    """None: the chat template stored in the GGUF (no HTML escaping); the native format otherwise."""
    return NATIVE_CHAT_FORMAT if tool_mode() == "native" else None


def default_threads() -> int:
    """Threads for generation: the cores this process may use, at most 4 (more rarely helps a 1.5B model)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


@dataclass
class ServerOptions:
    """How to serve a GGUF; defaults fit 2 cores and 24 GB (the 1.5B Q4 model and a 16k context take ~1.6 GB)."""

    model_path: Path
    n_threads: int = field(default_factory=default_threads)
    n_ctx: int = 16384
    port: int = 0  # 0: a free port
    startup_timeout_s: float = 300.0
    model_alias: str = MODEL_ALIAS
    chat_format: str | None = field(default_factory=default_chat_format)  # None: the GGUF's own template

    @classmethod
    def from_env(cls, model_path: Path, **overrides: object) -> ServerOptions:
        """Options with `TRIFORGE_LOCAL_THREADS` / `TRIFORGE_LOCAL_CTX` applied, then explicit overrides."""
        opts = cls(model_path=model_path)
        for var, attr in (("TRIFORGE_LOCAL_THREADS", "n_threads"), ("TRIFORGE_LOCAL_CTX", "n_ctx")):
            raw = os.environ.get(var)
            if raw:
                try:
                    setattr(opts, attr, int(raw))
                except ValueError:
                    raise LocalModelError(f"{var}={raw!r} is not an integer; set it to a number or unset it") from None
        for k, v in overrides.items():
            if v is not None:
                setattr(opts, k, v)
        return opts

    def argv(self, port: int) -> list[str]:
        fmt = ["--chat_format", self.chat_format] if self.chat_format else []
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path), "--host", HOST,
                "--port", str(port), *fmt, "--n_threads", str(self.n_threads), "--n_ctx", str(self.n_ctx),
                "--model_alias", self.model_alias]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def healthy(base_url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def log_tail(path: Path, lines: int = 20) -> list[str]:
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, 2) - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [ln for ln in text.splitlines() if ln.strip()][-lines:]


def explain_exit(log: Path, returncode: int | None) -> str:
    """One line: why the server process ended, and the fix."""
    tail = log_tail(log, 40)
    text = "\n".join(tail).lower()
    if "address already in use" in text or "errno 98" in text:
        return "its port was taken by another process; pass --port 0 (a free port) or stop the other server"
    if "no module named" in text and "llama_cpp" in text:
        return "llama-cpp-python is not installed in this environment; run `triforge local install`"
    if "failed to load model" in text or "unable to load model" in text or "gguf" in text and "error" in text:
        return ("llama.cpp could not load the model file; run `triforge local install --verify` "
                "or pass a valid GGUF with --model-path")
    sig = -returncode if returncode is not None and returncode < 0 else (
        returncode - 128 if returncode is not None and returncode > 128 else 0)  # the watchdog reports 128+N
    if sig in (signal.SIGSEGV, signal.SIGILL, signal.SIGBUS):
        return (f"llama.cpp crashed ({signal.Signals(sig).name}), usually a build that uses CPU instructions "
                f"this machine cannot run; rebuild it: `triforge local install --rebuild-server`")
    if sig == signal.SIGKILL:
        return "it was killed (SIGKILL; out of memory?); lower --ctx or free memory, then run again"
    last = tail[-1] if tail else "no output"
    return f"exit status {returncode}: {last[:160]}; see the log {log}"


_LIVE: set[LocalServer] = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _stop_all() -> None:
    for srv in list(_LIVE):
        srv.stop()


class LocalServer:
    """A server child process; use as `with LocalServer(...) as srv: srv.base_url` or call start()/stop().

    `command(port)` gives the argv (default: llama.cpp for `options`). With `watch_parent` (the default)
    the command runs under the watchdog so it cannot outlive this process.
    """

    def __init__(self, options: ServerOptions | None = None, *, command: Callable[[int], Sequence[str]] | None = None,
                 port: int | None = None, startup_timeout_s: float | None = None, log_path: Path | None = None,
                 watch_parent: bool = True, health: Callable[[str], bool] = healthy) -> None:
        if options is None and command is None:
            raise ValueError("LocalServer needs options or a command")
        self.options = options
        self._command = command or options.argv  # type: ignore[union-attr]
        self.requested_port = port if port is not None else (options.port if options else 0)
        self.startup_timeout_s = startup_timeout_s or (options.startup_timeout_s if options else 60.0)
        self.log_path = log_path
        self.watch_parent = watch_parent
        self._health = health
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_s = 0.0

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> LocalServer:
        if self.alive():
            return self
        if self.options is not None and self._command == self.options.argv and missing_llama_modules():
            raise LocalModelError("llama-cpp-python[server] is not installed in this environment; "
                                  "run `triforge local install` (or pip install 'triforge[local]')")
        fixed = self.requested_port != 0
        if fixed and port_in_use(self.requested_port):
            raise LocalModelError(f"port {self.requested_port} on {HOST} is in use; pass --port 0 for a free port "
                                  f"or stop what listens there (`triforge local status`)")
        for attempt in range(3):  # a free port can be taken between choosing it and the server binding it
            self.port = self.requested_port or free_port()
            try:
                self._launch()
                self._wait_ready()
                return self
            except LocalModelError as e:
                if fixed or "port was taken" not in str(e) or attempt == 2:
                    raise
        return self

    def _launch(self) -> None:
        log = self.log_path or local_dir() / "logs" / f"server-{os.getpid()}-{self.port}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log
        argv = list(self._command(self.port))
        if self.watch_parent:
            argv = [sys.executable, "-m", "triforge.local.watchdog", "--", *argv]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE if self.watch_parent else subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=server_env(),
            )
        self.started_s = time.time()
        with _LIVE_LOCK:
            _LIVE.add(self)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                rc = self.proc.returncode
                self.stop()
                raise LocalModelError(f"the local model server stopped while starting: "
                                      f"{explain_exit(self.log_path, rc)}")  # type: ignore[arg-type]
            if self._health(self.base_url):
                return
            time.sleep(0.25)
        self.stop()
        raise LocalModelError(
            f"the local model server did not answer within {self.startup_timeout_s:g} s; the machine may be "
            f"overloaded; see {self.log_path} and try again (TRIFORGE_LOCAL_THREADS, --ctx)"
        )

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after `grace_s`. Safe to call twice."""
        proc = self.proc
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if proc is None:
            return
        stop_group(proc.pid, grace_s, proc)
        if proc.stdin:
            proc.stdin.close()
        self.proc = None

    def release(self) -> int | None:
        """Let the server outlive this process (`local serve --detach`); returns its pid. Needs watch_parent=False."""
        if self.watch_parent:
            raise ValueError("a server under the watchdog cannot outlive its parent; use watch_parent=False")
        with _LIVE_LOCK:
            _LIVE.discard(self)
        pid = self.pid
        self.proc = None
        return pid

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __hash__(self) -> int:
        return id(self)


def stop_group(pid: int, grace_s: float = 5.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the process group led by `pid`, wait, then SIGKILL it."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None and not _group_alive(pid):
                break
        else:
            try:
                os.waitpid(pid, os.WNOHANG)  # reap it if it happens to be our child
            except ChildProcessError:
                pass
            if not _group_alive(pid):
                break
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc is not None:
        try:  # a process in uninterruptible sleep may outlast SIGKILL for a while: never hang an exit on it
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
