"""The package's layers (docs/design.md, "Layers"): imports run one way.

    cli -> cpagent, astra, maestro -> local, testing, executors, sandbox, ui, data -> confine -> core

A subsystem never imports another subsystem: maestro runs cpagent's CP-Bench through the `cpbench` entry
point (`triforge.core.entry_points`), which `triforge/__init__.py` registers by module path. Checked on the
source (every import, at module level or inside a function, and string module paths a module could import
dynamically), and at import time (what importing a package's modules loads). The checker itself is tested on
planted violations and on honest imports that must pass.
"""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import triforge

SRC = Path(triforge.__file__).resolve().parent.parent
SUBSYSTEMS = {"cpagent", "astra", "maestro"}
SERVICES = {"local", "testing", "executors", "sandbox", "ui", "data"}
# package -> the packages it may import (besides itself and the root `triforge`, which holds the version)
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "confine": {"core"},
    **{s: {"confine", "core"} for s in SERVICES},
    **{s: SERVICES - {"testing"} | {"confine", "core"} for s in SUBSYSTEMS},  # no test doubles in product code
    "cli": SUBSYSTEMS | SERVICES | {"confine", "core"},
    "": {"core"},  # triforge/__init__.py wires providers and entry points into core, by module path
}
ALLOWED["testing"] |= {"ui"}  # the offline demo renders its run's trace.html


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_sources() -> dict[str, tuple[str, bool]]:
    """module name -> (source, is a package's __init__) for every module of triforge."""
    return {_module_name(p, SRC): (p.read_text(encoding="utf-8"), p.name == "__init__.py")
            for p in sorted((SRC / "triforge").rglob("*.py"))}


def _typing_only(tree: ast.AST) -> set[int]:
    return {id(n) for blk in ast.walk(tree) if isinstance(blk, ast.If) and "TYPE_CHECKING" in ast.unparse(blk.test)
            for stmt in blk.body for n in ast.walk(stmt)}


def imports_of(module: str, source: str, is_package: bool, known: set[str],
               ) -> Iterator[tuple[str, int, str]]:
    """(imported module, line, how) for every triforge module `module` names: `import`, `from`, relative
    imports, `from triforge import pkg`, at any depth (functions included), and string module paths."""
    tree = ast.parse(source)
    typing_only = _typing_only(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join(here + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split(":")[0] in known:
            targets = [node.value.split(":")[0]]
        else:
            continue
        how = "string" if isinstance(node, ast.Constant) else "type-checking" if id(node) in typing_only else "import"
        for t in targets:
            if t == "triforge" or t.startswith("triforge."):
                yield t, node.lineno, how


def package_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def layer_violations(sources: dict[str, tuple[str, bool]]) -> list[str]:
    known = set(sources)
    found = []
    for module, (source, is_package) in sources.items():
        here = package_of(module)
        for target, line, how in imports_of(module, source, is_package, known):
            there = package_of(target)
            wiring = here == "" and how == "string"  # the root registers providers and entry points by path
            if there and there != here and there not in ALLOWED.get(here, set()) and not wiring:
                found.append(f"{module}:{line} ({how}) -> {target}")
    return found


def import_cycles(sources: dict[str, tuple[str, bool]]) -> list[list[str]]:
    """Strongly connected groups of modules (imports at any depth; type-checking-only ones and string paths,
    which name a module to run or to load on first use, left out)."""
    known = set(sources)
    graph = {m: {t for t, _, how in imports_of(m, s, p, known) if how == "import" and t != m and t in known}
             for m, (s, p) in sources.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                cycles.append(sorted([v, *group]))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


# ---- the real package


def test_no_module_imports_against_the_layers():
    assert layer_violations(package_sources()) == []


def test_no_import_cycle_crosses_a_package():
    crossing = [c for c in import_cycles(package_sources()) if len({package_of(m) for m in c}) > 1]
    assert crossing == []


def test_astra_lab_has_no_import_cycle():
    """task -> compile -> evaluate -> check -> lab: the lab's modules import each other one way, at the top."""
    sources = {m: s for m, s in package_sources().items()
               if m.startswith("triforge.astra.") and not m.startswith("triforge.astra.corpus")}
    assert import_cycles(sources) == []


# run as a file, beside the module it imports by its bare name, by the reference runner; never imported
SCRIPTS = {"triforge.cpagent.ref_jobs_probe", "triforge.cpagent.model_capture"}


def _loaded_by(modules: list[str]) -> list[str]:
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(sys.modules)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return [m for m in json.loads(r.stdout) if m.startswith("triforge.")]


@pytest.mark.parametrize("package", ["core", "confine", "sandbox", "executors", "ui", "testing", "local",
                                     "cpagent", "maestro", "astra"])
def test_importing_a_package_loads_nothing_it_may_not_import(package):
    modules = sorted(m for m in package_sources() if package_of(m) == package and m not in SCRIPTS)
    loaded = {package_of(m) for m in _loaded_by(modules)}
    assert loaded - ALLOWED[package] - {package} == set()


def test_the_cpbench_entry_point_keeps_maestros_contract():
    """cpagent's `cpbench` entry point has every function maestro's `CPBenchEntry` calls, with its parameters."""
    from triforge.core import entry_points
    from triforge.maestro.benchmarks.cpbench import CPBenchEntry

    entry = entry_points.load("cpbench")
    assert isinstance(entry, CPBenchEntry)
    for name, wanted in inspect.getmembers(CPBenchEntry, inspect.isfunction):
        if name.startswith("_"):
            continue
        given = inspect.signature(getattr(entry, name)).parameters
        named = [p for p in list(inspect.signature(wanted).parameters.values())[1:] if p.kind != p.VAR_KEYWORD]
        assert [p.name for p in named if p.name in given] == [p.name for p in named], name


def test_an_unknown_entry_point_is_named_with_the_registered_ones():
    from triforge.core import entry_points

    with pytest.raises(entry_points.EntryPointMissing, match=r"no entry point 'nope'.*cpbench"):
        entry_points.load("nope")


def test_every_package_opens_with_a_docstring_saying_what_it_is_for():
    bare = [m or "triforge" for m, (source, is_package) in package_sources().items()
            if is_package and len((ast.get_docstring(ast.parse(source)) or "").split()) < 5]
    assert bare == []


# ---- the checker, on planted violations and honest imports


def _one(module: str, source: str, is_package: bool = False) -> dict[str, tuple[str, bool]]:
    known = {"triforge.core.errors": ("", False), "triforge.core.entry_points": ("", False),
             "triforge.cpagent": ("", True), "triforge.cpagent.grader": ("", False),
             "triforge.maestro": ("", True), "triforge.maestro.bench": ("", False),
             "triforge.maestro.benchmarks": ("", True), "triforge.confine.proc": ("", False),
             "triforge.ui.trace_view": ("", False), "triforge.sandbox.pool": ("", False),
             "triforge.testing.scripted": ("", False)}
    return {**known, module: (source, is_package)}


PLANTED = [
    ("triforge.maestro.benchmarks.cpbench", "def f():\n    from triforge.cpagent.grader import grade\n"),
    ("triforge.maestro.benchmarks.cpbench", "from triforge import cpagent\n"),
    ("triforge.maestro.benchmarks.cpbench", "from ...cpagent import grader\n"),
    ("triforge.maestro.benchmarks.cpbench", "class A:\n    def m(self):\n        import triforge.cpagent.grader as g\n"),
    ("triforge.maestro.benchmarks.cpbench", "FN = 'triforge.cpagent.grader:grade_output'\n"),
    ("triforge.maestro.benchmarks.cpbench", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from triforge.cpagent.grader import Verdict\n"),
    ("triforge.cpagent.solve", "from triforge.maestro.bench import open_benchmark\n"),
    ("triforge.testing.fake_server", "def f():\n    from triforge.maestro import bench\n"),
    ("triforge.core.llm", "try:\n    from triforge.sandbox.pool import KernelPool\nexcept ImportError:\n    pass\n"),
    ("triforge.core.llm", "from triforge.confine.proc import run\n"),
    ("triforge.confine.run", "from triforge.ui.trace_view import render_html\n"),
    ("triforge.sandbox.pool", "from triforge.executors.local import LocalPool\n"),
    ("triforge.astra.lab", "from triforge.testing.scripted import ScriptedLLM\n"),
    ("triforge", "from triforge.cpagent import api\n"),
    ("triforge.core.config", "from triforge.core import entry_points\nentry_points.register('x', 'triforge.cpagent.grader')\n"),
]


@pytest.mark.parametrize("module,source", PLANTED)
def test_a_planted_layer_violation_is_caught(module, source):
    found = layer_violations(_one(module, source, module == "triforge"))
    assert len(found) == 1 and found[0].startswith(f"{module}:"), found


HONEST = [
    ("triforge.maestro.benchmarks.cpbench", "from triforge.core import entry_points\n"
                                            "def f():\n    return entry_points.load('cpbench')\n"),
    ("triforge.maestro.benchmarks.cpbench", '"""Runs triforge.cpagent through its entry point."""\n'),
    ("triforge.maestro.benchmarks.cpbench", "from triforge.maestro.bench import open_benchmark\n"),
    ("triforge.maestro.benchmarks.cpbench", "from ..bench import open_benchmark\n"),
    ("triforge.cpagent.solve", "from triforge.sandbox.pool import KernelPool\nfrom triforge.ui import trace_view\n"),
    ("triforge.sandbox.pool", "from triforge.confine.proc import run\n"),
    ("triforge.testing.demo", "from triforge.ui.trace_view import render_html\n"),
    ("triforge.cli.maestro", "from triforge.testing.scripted import ScriptedLLM\nimport triforge.cpagent.grader\n"),
    ("triforge.core.provenance", "from triforge import __version__\n"),
    ("triforge", "from triforge.core import entry_points\nentry_points.register('cpbench', 'triforge.cpagent.grader')\n"),
    ("triforge.core.trace", "ATTR = 'triforge.maestro.score'\n"),  # a trace attribute, not a module
]


@pytest.mark.parametrize("module,source", HONEST)
def test_an_honest_import_passes(module, source):
    assert layer_violations(_one(module, source, module == "triforge")) == []


def test_a_planted_cycle_across_packages_is_caught_and_one_inside_a_package_is_told_apart():
    sources = {"triforge.executors.local": ("def f():\n    from triforge.sandbox import pool\n", False),
               "triforge.sandbox.pool": ("from triforge.executors.local import LocalPool\n", False),
               "triforge.astra.lab": ("from triforge.astra.evaluate import evaluate\n", False),
               "triforge.astra.evaluate": ("def f():\n    from triforge.astra import lab\n", False),
               "triforge.astra.task": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from triforge.astra.lab import CheckResult\n", False)}
    cycles = sorted(import_cycles(sources))
    assert cycles == [["triforge.astra.evaluate", "triforge.astra.lab"],
                      ["triforge.executors.local", "triforge.sandbox.pool"]]


# ---- the provider seam (core names no provider)


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
