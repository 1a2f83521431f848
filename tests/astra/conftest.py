"""Fixtures for astra tests: a GPU gate and a shared worker."""

from __future__ import annotations

import pytest


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


HAS_CUDA = _cuda()


@pytest.fixture(scope="session")
def gpu_worker():
    if not HAS_CUDA:
        pytest.skip("needs an NVIDIA GPU with torch and cuda-python")
    from triforge.astra.worker import Worker

    w = Worker(timeout=300)
    yield w
    w.stop()
