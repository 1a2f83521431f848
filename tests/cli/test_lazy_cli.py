"""`triforge --version` and `--help` import no subsystem; a sub-command imports only what it runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("cpmpy", "ortools", "numpy", "torch", "openai", "httpx", "pydantic", "psutil", "pygments", "ipykernel",
         "rich.progress", "rich.table", "rich.syntax", "rich.traceback", "triforge.cpagent", "triforge.astra",
         "triforge.maestro", "triforge.sandbox", "triforge.confine", "triforge.core.llm", "triforge.local")


def _imported_by(args: list[str]) -> tuple[set[str], str]:
    code = (f"import json, sys\nfrom triforge.cli.app import main\ntry:\n    main({args!r})\nexcept SystemExit:\n"
            "    pass\nprint(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "COLUMNS": "120"})
    assert out.returncode == 0, out.stderr
    *text, modules = out.stdout.strip().splitlines()
    return set(json.loads(modules)), "\n".join(text)


def _heavy(modules: set[str], names=HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_version_imports_no_subsystem_and_no_heavy_library():
    modules, text = _imported_by(["--version"])
    assert text.startswith("triforge ")
    assert _heavy(modules) == []


def test_help_lists_every_command_without_importing_them():
    modules, text = _imported_by(["--help"])
    for name in ("cpagent", "astra", "maestro", "llm", "trace", "doctor", "demo"):
        assert name in text
    assert _heavy(modules, [n for n in HEAVY if not n.startswith(("rich.", "pygments"))]) == []


def test_a_sub_command_imports_its_own_module_only():
    modules, text = _imported_by(["cpagent", "grade", "--help"])
    assert "--submission" in text and "<bool>" not in text  # a command loaded late gets the root's help fixes
    assert "triforge.cli.cpagent" in modules
    assert _heavy(modules, ("triforge.cli.cpagent_agent", "triforge.cli.astra", "triforge.cli.maestro", "openai",
                            "cpmpy", "torch")) == []


@pytest.mark.parametrize("args", [["trace", "--help"], ["cpagent", "solve", "--help"], ["maestro", "--help"]])
def test_lazy_commands_still_run(args):
    _, text = _imported_by(args)
    assert "Usage:" in text and "--help" in text


def test_an_unknown_command_is_still_a_clear_error():
    out = subprocess.run([sys.executable, "-m", "triforge.cli.app", "cpagnet"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "cpagnet" in out.stderr and "cpagent" in out.stderr
