"""Unix sockets at any path: the kernel takes at most 107 bytes of a socket's path, and a runtime folder
(`$XDG_RUNTIME_DIR`, a test's temporary folder) can be deeper than that. A longer path is reached through
the folder's descriptor (`/proc/self/fd/N/name`), which names the same file."""

from __future__ import annotations

import os
import socket
from pathlib import Path

_MAX = 100  # sun_path holds 108 bytes with the NUL; leave room


def _call(method, path: Path) -> None:
    text = str(path)
    if len(os.fsencode(text)) <= _MAX:
        method(text)
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        method(f"/proc/self/fd/{fd}/{path.name}")
    finally:
        os.close(fd)


def bind(sock: socket.socket, path: Path) -> None:
    _call(sock.bind, path)


def connect(sock: socket.socket, path: Path) -> None:
    _call(sock.connect, path)
