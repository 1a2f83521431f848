"""Every parse of Python source in triforge goes through `core.pyparse` (one thread at a time): CPython 3.11's
AST constructor keeps its recursion depth in state shared by threads, and the suite once failed with
`SystemError: AST constructor recursion depth mismatch` while grading from a thread pool."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import triforge
from triforge.core import pyparse

SRC = Path(triforge.__file__).parent


def direct_parses(root: Path) -> list[str]:
    """`ast.parse(...)` calls outside core/pyparse.py, as `file:line`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "core" / "pyparse.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parse"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "ast"):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_module_parses_python_around_the_lock():
    assert direct_parses(SRC) == []


def test_the_rule_sees_a_planted_direct_parse(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "m.py").write_text("import ast\n\ndef f(s):\n    return ast.parse(s)\n")
    assert direct_parses(tmp_path) == ["m.py:4"]


def test_parses_from_many_threads_give_the_same_trees():
    source = "\n".join(f"def f{i}(x):\n    return [y * {i} for y in range(x) if y % 3]" for i in range(200))
    want = ast.dump(pyparse.parse(source))
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.extend(ast.dump(pyparse.parse(source)) for _ in range(5)))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want] * 30
    assert isinstance(pyparse.parse("1 + 2", mode="eval"), ast.Expression)
