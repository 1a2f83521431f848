"""Test-wide guards: no traffic leaves this machine, no real model is reached by accident."""

from __future__ import annotations

import ipaddress
import socket

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _local_addresses() -> set[str]:
    addrs = {"localhost"}
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            addrs.add(info[4][0])
    except OSError:
        pass
    return addrs


_LOCAL = _local_addresses()


def _allowed(address) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX and friends
        return True
    host = address[0]
    if host in _LOCAL:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or str(ip) in _LOCAL


def _guarded_connect(self, address):
    if not _allowed(address):
        raise ConnectionRefusedError(f"triforge test guard: connection to non-local address {address!r} blocked")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if not _allowed(address):
        raise ConnectionRefusedError(f"triforge test guard: connection to non-local address {address!r} blocked")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True, scope="session")
def _block_remote_network():
    socket.socket.connect = _guarded_connect
    socket.socket.connect_ex = _guarded_connect_ex
    yield
    socket.socket.connect = _real_connect
    socket.socket.connect_ex = _real_connect_ex


@pytest.fixture(autouse=True)
def _no_ambient_model_config(monkeypatch, tmp_path_factory):
    """Keep the user's real triforge config and keys out of tests."""
    home = tmp_path_factory.getbasetemp() / "triforge_home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("TRIFORGE_HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    for var in ("TRIFORGE_MODEL", "TRIFORGE_BASE_URL", "TRIFORGE_API_KEY_ENV", "TRIFORGE_CONFIG", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def _no_ambient_data(monkeypatch, tmp_path_factory):
    """Tests read the bundled data sets: the user's fetched sets and data variables stay out."""
    home = tmp_path_factory.getbasetemp() / "triforge_data_home"
    monkeypatch.setenv("TRIFORGE_DATA_HOME", str(home))
    for var in ("TRIFORGE_CPBENCH", "TRIFORGE_IFBENCH", "TRIFORGE_HOTPOTQA", "TRIFORGE_HOTPOTQA_CORPUS",
                "TRIFORGE_DATA_URL"):
        monkeypatch.delenv(var, raising=False)
