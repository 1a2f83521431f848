"""Progress of long work: one live line on a terminal, plain dated lines in a log.

`Progress` holds what a reader wants to know (step n of N, the last event in a few words, elapsed time,
tokens) and shows it: on a terminal it repaints one line every second; without one (a pipe, `nohup`, CI)
it prints a line when the step changes and a heartbeat every `every_s` seconds, so a log shows what
happened and that the work is alive. `TraceProgress` feeds a `Progress` from the spans of a run
(`triforge.core.trace.listening`), so an agent loop is watched from outside without any change to it.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO


def short(text: Any, width: int = 40) -> str:
    """`text` on one line, at most `width` characters."""
    one = " ".join(str(text).split())
    return one if len(one) <= width else one[: width - 1] + "…"


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}" if s >= 60 else f"{s} s"


class Progress:
    """A status line for one long piece of work; thread-safe. Use as a context manager.

    `label` names the work; `total` and `unit` make the counter ("step 3 of 12"); `live` forces the
    terminal (True) or plain (False) mode, default: whether `stream` is a terminal (and TERM is not dumb).
    """

    def __init__(self, label: str, *, total: int | None = None, unit: str = "step", stream: TextIO | None = None,
                 live: bool | None = None, every_s: float = 10.0, tick_s: float = 1.0, first_after_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        if live is None:
            live = bool(getattr(self.stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"
        self.live = live
        self.every_s = every_s
        self.tick_s = tick_s
        self.clock = clock
        self.done = 0
        self.phase = ""
        self.last = ""
        self.tokens = 0
        self._t0 = clock()
        # Without a terminal the first heartbeat comes after `first_after_s`: work that fails at once (bad
        # input) leaves only its one error line.
        self._last_plain = self._t0 - every_s + first_after_s
        self._painted = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # --- state -------------------------------------------------------------------------------------

    def set(self, done: int | None = None, *, total: int | None = None, phase: str | None = None) -> None:
        """Move the counter (and/or the phase name); in plain mode a change prints a line."""
        with self._lock:
            changed = (done is not None and done != self.done) or (phase is not None and phase != self.phase)
            if done is not None:
                self.done = done
            if total is not None:
                self.total = total
            if phase is not None:
                self.phase = phase
            if changed:
                self._show(force_plain=True)

    def advance(self, n: int = 1, last: str | None = None) -> None:
        with self._lock:
            self.done += n
            if last is not None:
                self.last = last
            self._show(force_plain=True)

    def note(self, last: str) -> None:
        """The latest event, in a few words (e.g. `python_eval -> 338350`)."""
        with self._lock:
            self.last = last
            self._show(force_plain=False)

    def add_tokens(self, n: int) -> None:
        with self._lock:
            self.tokens += n

    def log(self, text: str) -> None:
        """A permanent line (above the live line on a terminal)."""
        with self._lock:
            self._clear()
            self.stream.write(text + "\n")
            self.stream.flush()
            self._show(force_plain=False)

    @property
    def elapsed_s(self) -> float:
        return self.clock() - self._t0

    def render(self) -> str:
        """The status as one line, e.g. `cpagent: step 3 of 12 · python_eval -> 338350 · 45 s · 1,234 tok`."""
        parts = []
        if self.phase:
            parts.append(self.phase)
        if self.total is not None or self.done:
            parts.append(f"{self.unit} {self.done}" + (f" of {self.total}" if self.total is not None else ""))
        head = f"{self.label}: {' '.join(parts)}" if parts else self.label
        tail = [_clock(self.elapsed_s)]
        if self.tokens:
            tail.append(f"{self.tokens:,} tok")
        if self.last:
            tail.insert(0, self.last)
        return " · ".join([head, *tail])

    # --- display -----------------------------------------------------------------------------------

    def _width(self) -> int:
        return max(20, shutil.get_terminal_size((100, 24)).columns - 1)

    def _clear(self) -> None:
        if self.live and self._painted:
            self.stream.write("\r\x1b[2K")
            self._painted = False

    def _show(self, *, force_plain: bool) -> None:
        if self._stop.is_set():
            return
        if self.live:
            self.stream.write("\r\x1b[2K" + short(self.render(), self._width()))
            self._painted = True
            self.stream.flush()
        elif force_plain or self.clock() - self._last_plain >= self.every_s:
            self._last_plain = self.clock()
            self.stream.write(f"[{time.strftime('%H:%M:%S')}] {self.render()}\n")
            self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(self.tick_s if self.live else min(self.tick_s, self.every_s)):
            with self._lock:
                self._show(force_plain=False)

    def start(self) -> Progress:
        """Begin showing (without a terminal, a first line after `first_after_s`, then heartbeats)."""
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._ticker.start()
        return self

    def close(self, final: str | None = None) -> None:
        """Stop repainting; leave `final` (or nothing) where the live line was."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        with self._lock:
            self._clear()
            if final:
                self.stream.write(final + "\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class TraceProgress:
    """A span listener that shows an agent run on a `Progress`.

    A step span opening moves the counter (when `count_steps`), a finished LLM span adds its tokens, a
    finished tool span becomes the last event (`tool -> first words of its result`). Register it with
    `triforge.core.trace.listening(TraceProgress(progress))`.
    """

    def __init__(self, progress: Progress, *, count_steps: bool = True) -> None:
        self.progress = progress
        self.count_steps = count_steps

    def __call__(self, event: str, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        attrs = record.get("attributes") or {}
        if event == "start" and kind == "step" and self.count_steps:
            step = attrs.get("triforge.step")
            if isinstance(step, int):
                self.progress.set(step)
        elif event == "end" and kind == "llm":
            self.progress.add_tokens(int(attrs.get("gen_ai.usage.input_tokens") or 0)
                                     + int(attrs.get("gen_ai.usage.output_tokens") or 0))
            self.progress.note(f"{record.get('agent') or 'model'} replied")
        elif event == "end" and kind == "tool":
            name = attrs.get("gen_ai.tool.name") or "tool"
            status = str(record.get("status") or "ok")
            result = attrs.get("gen_ai.tool.call.result")
            said = short(result, 40) if status == "ok" else f"{status}: {short(result, 32)}"
            self.progress.note(f"{name} -> {said or '(no output)'}")
