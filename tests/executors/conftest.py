"""One local Ray instance (loopback only, 2 CPUs) shared by the Ray test modules, stopped after the last."""

from __future__ import annotations

import importlib.util
import sys

import pytest

RAY_FIXTURE = "rex"


@pytest.fixture(scope="session")
def _ray_holder():
    holder: dict[str, object] = {}
    yield holder
    if "ex" in holder:
        holder.pop("ex").close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def rex(request, _ray_holder):
    """The Ray executor; the module using it is sent to the workers by value (they cannot import a test module).
    The instance is stopped after the last module of the session that uses it, not kept for the whole suite."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("the ray extra is not installed (pip install 'triforge[ray]')")
    from triforge.executors.ray_executor import RayExecutor

    if "ex" not in _ray_holder:
        _ray_holder["ex"] = RayExecutor(num_cpus=2)
    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[request.module.__name__])
    yield _ray_holder["ex"]
    items = request.session.items
    mine = [i for i, it in enumerate(items) if it.module is request.module]
    if mine and not any(RAY_FIXTURE in it.fixturenames for it in items[mine[-1] + 1:]):
        _ray_holder.pop("ex").close()  # type: ignore[attr-defined]
