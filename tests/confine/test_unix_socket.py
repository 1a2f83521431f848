"""A socket in a folder deeper than the kernel's 107-byte limit binds and connects (a deep $XDG_RUNTIME_DIR)."""

from __future__ import annotations

import socket

from triforge.confine import unix_socket


def test_a_socket_past_the_path_limit_binds_and_answers(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "s.sock"
    assert len(str(path)) > 108
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix_socket.bind(srv, path)
    srv.listen(1)
    assert path.exists()  # bound where it was asked, not elsewhere
    cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix_socket.connect(cli, path)
    conn, _ = srv.accept()
    cli.sendall(b"hi")
    assert conn.recv(2) == b"hi"
    for s in (conn, cli, srv):
        s.close()

