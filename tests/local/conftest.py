"""Fixtures for the local-model tests (helpers live in local_helpers.py)."""

from __future__ import annotations

import pytest
from local_helpers import downloader, echo_script, fake_parts, no_orphans  # noqa: F401


@pytest.fixture(autouse=True)
def _own_triforge_home(monkeypatch, tmp_path):
    """Each test gets its own TRIFORGE_HOME: chosen models and server state never leak between tests."""
    monkeypatch.setenv("TRIFORGE_HOME", str(tmp_path / "triforge_home"))
