"""Core imports nothing above it (DESIGN.md: cli -> subsystems -> local, testing -> core)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import triforge.core

CORE = Path(triforge.core.__file__).parent
ABOVE = ("triforge.local", "triforge.cpagent", "triforge.astra", "triforge.maestro", "triforge.testing",
         "triforge.cli", "triforge.sandbox", "triforge.confine", "triforge.executors", "triforge.ui", "triforge.data")


def _core_modules() -> list[str]:
    return sorted(f"triforge.core.{p.stem}" for p in CORE.glob("*.py") if p.stem != "__init__")


def test_importing_every_core_module_imports_nothing_above_core():
    code = ("import importlib, json, sys\n"
            f"for m in {_core_modules()!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(sys.modules)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = [m for m in json.loads(r.stdout) if m.startswith(ABOVE)]
    assert loaded == [], f"importing core loaded {loaded}"


def test_no_core_source_names_a_module_above_core():
    """Also imports inside functions, which an import-time check misses (core/config.py once imported
    triforge.local inside resolve_model)."""
    found = []
    for path in sorted(CORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.name}:{node.lineno} imports {n}" for n in names if n.startswith(ABOVE)]
    assert found == []


def test_the_local_model_plugs_in_through_the_provider_seam():
    from triforge.core import providers

    local = providers.for_alias("local")
    assert local is not None and providers.for_base_url("local:///models/x.gguf") is local
    assert providers.for_base_url("http://127.0.0.1:8000/v1") is None


def test_a_registered_provider_serves_its_alias_and_its_scheme(monkeypatch):
    from triforge.core import providers
    from triforge.core.config import ModelConfig, Settings, resolve_model
    from triforge.core.llm import get_llm

    class Toy:
        alias, scheme = "toy", "toy://"
        made: list[str] = []

        def builtin_config(self) -> ModelConfig:
            return ModelConfig(model="toy", base_url="toy://one")

        def is_default(self) -> bool:
            return True

        def make_llm(self, alias, config):
            self.made.append(config.base_url)
            return "toy llm"

    monkeypatch.setattr(providers, "_registry", {"toy": Toy()})
    monkeypatch.delenv("TRIFORGE_MODEL", raising=False)
    monkeypatch.delenv("TRIFORGE_BASE_URL", raising=False)
    assert resolve_model(None, Settings()) == ("toy", ModelConfig(model="toy", base_url="toy://one"))
    assert get_llm("toy", settings=Settings()) == "toy llm" and Toy.made == ["toy://one"]
    # triforge.toml defining the alias wins over the provider's built-in config
    own = Settings(models={"toy": ModelConfig(model="m", base_url="http://127.0.0.1:9/v1")})
    assert resolve_model("toy", own)[1].base_url == "http://127.0.0.1:9/v1"
