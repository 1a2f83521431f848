"""The astra worker's wire: length-prefixed JSON messages over two pipes, read with a deadline.

JSON rather than pickle: the worker runs model-written code, so nothing it sends back may run code in
the harness when it is read, and a reply larger than `MAX_MESSAGE` is refused before it is read.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

MAX_MESSAGE = 64 << 20  # bytes: a worker's reply (verdicts, timings, logs) is far smaller
_HEADER = struct.Struct(">I")


class WireTimeout(Exception):
    """No (whole) message arrived before the deadline."""


class Fatal(Exception):
    """Raised by a job handler when the worker cannot go on (the CUDA context is unusable): the reply is a
    crash, and the worker is replaced."""


def send(fd: int, message: dict[str, Any], timeout: float | None = None) -> None:
    """Write one message; `WireTimeout` when the other side has not taken it within `timeout` seconds."""
    data = json.dumps(message, default=str).encode()
    if len(data) > MAX_MESSAGE:
        data = json.dumps({"verdict": "crash", "fatal": True,
                           "reasons": [f"worker reply of {len(data)} bytes exceeds {MAX_MESSAGE}"]}).encode()
    view = memoryview(_HEADER.pack(len(data)) + data)
    deadline = None if timeout is None else time.monotonic() + timeout
    while view:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([], [fd], [], wait)[1]:
                raise WireTimeout
        view = view[os.write(fd, view[:4096]):]  # PIPE_BUF: a writable pipe takes it whole


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise WireTimeout
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv(fd: int, timeout: float | None = None) -> dict[str, Any]:
    """The next message; `EOFError` when the other side is gone, `WireTimeout` after `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size, deadline))
    if size > MAX_MESSAGE:
        raise EOFError(f"message of {size} bytes exceeds {MAX_MESSAGE}")
    message = json.loads(_read_exactly(fd, size, deadline))
    if not isinstance(message, dict):
        raise EOFError("a message must be a JSON object")
    return message
