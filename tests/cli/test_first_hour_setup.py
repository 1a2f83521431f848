"""The set-up a new user meets first (issue 39): what scripts/main.sh prints from its first second, hints that
run as printed, and a README that says how to call `triforge`, what its examples need, and measured times."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SUBCOMMANDS = r"(llm|trace|demo|doctor|cpagent|astra|maestro|local|data)\b"  # a command, not prose


def test_main_sh_says_what_it_does_before_the_first_slow_step(tmp_path):
    """Stopped at once in setup (a Python that is too old): it has already said what it is doing."""
    fake_python = tmp_path / "python3"
    fake_python.write_text("#!/bin/sh\nexit 1\n")
    fake_python.chmod(0o755)
    r = subprocess.run(["bash", str(ROOT / "scripts" / "main.sh")], capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake_python), "HOME": str(tmp_path)})
    assert r.returncode != 0
    first = r.stdout.splitlines()[0] if r.stdout else ""
    assert "1/3" in first and ".venv" in first, r.stdout + r.stderr


def test_every_triforge_command_the_scripts_print_runs_as_printed():
    """`echo`ed hints in scripts/*.sh call .venv/bin/triforge, never a bare `triforge` that is not on PATH."""
    for script in (ROOT / "scripts").glob("*.sh"):
        for n, line in enumerate(script.read_text().splitlines(), 1):
            if not re.match(r"\s*(echo|printf|step)\b", line):
                continue
            for m in re.finditer(rf"(\S*)triforge (?={SUBCOMMANDS})", line):
                assert m.group(1).endswith(".venv/bin/"), f"{script.name}:{n}: {line.strip()}"


def test_the_readme_says_how_to_run_triforge_near_the_top():
    top = README[: README.index("## Pointing triforge at a real endpoint")]
    assert ".venv/bin/triforge" in top and "source .venv/bin/activate" in top


def _command_lines(text: str) -> list[str]:
    """`triforge ...` lines of the README's shell blocks (fenced with bash, sh or nothing)."""
    lines, lang = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            lang = line[3:].strip() if lang is None else None
            continue
        if lang in ("bash", "sh", "") and line.strip().startswith("triforge "):
            lines.append(line.strip())
    return lines


def test_readme_examples_need_no_unconfigured_alias_and_no_data_outside_the_repository():
    lines = _command_lines(README)
    assert lines
    for line in lines:
        assert "--model coder" not in line and "-m coder" not in line, line  # only the toml example names coder
        assert "../shared" not in line, line


def test_readme_states_measured_times_and_what_they_cover():
    two = README[README.index("## Two commands for a fresh machine"):README.index("## Pointing triforge")]
    assert "about 16 minutes" not in two and "about 12 minutes" not in two
    assert re.search(r"16 to 22\s+minutes", two) and "llama.cpp" in two
    assert re.search(r"7 to 12\s+minutes", two)


def test_readme_says_out_is_optional_as_the_cli_does():
    assert "runs/<name>-<YYYYmmdd-HHMMSS>" in README
