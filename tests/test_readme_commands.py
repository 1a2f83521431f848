"""Every command line in the README's shell code blocks runs on a fresh checkout.

Whatever the README holds is parsed (```bash / sh / shell / console blocks, and unlabelled blocks whose every
line is a `triforge` command). A `triforge` command that is cheap and needs no model or GPU runs for real, in an
empty folder with a fresh data home; any other `triforge` command runs with `--help` appended, so its
subcommands and options must exist as written. Commands that set up a machine are skipped only through the
allow-list below, each with its reason; a command nobody classified fails the test.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SHELL_LANGS = {"bash", "sh", "shell", "console"}
# triforge subcommands run as written: no model, no GPU, no network, a few seconds at most
RUN_FOR_REAL = {("data", "list"), ("data", "verify"), ("data", "path"), ("demo",), ("trace", "summary"),
                ("trace", "view"), ("astra", "tasks")}
# the only commands not run, each with why
NOT_RUN = {
    "bash scripts/main.sh": "sets up the machine: creates .venv, installs packages and the local model (minutes)",
    "bash scripts/test.sh": "sets up the machine and runs the whole test suite, this test included",
    "git clone": "clones over the network",
    "cd": "changes the shell's folder only",
    "pip install": "installs packages from PyPI",
    "python -m venv": "creates a virtual environment",
    "python3 -m venv": "creates a virtual environment",
    "source": "changes the shell's environment only",
}
_TRIFORGE = re.compile(r"^(?:\S*/)?triforge$")


def readme_commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) for each command line of the README's shell blocks; comments dropped,
    backslash continuations joined, `$ ` prompts removed."""
    out: list[tuple[int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not fence:
            i += 1
            continue
        marker, lang = fence.group(1), fence.group(2).lower()
        start = i + 1
        end = next((j for j in range(start, len(lines)) if lines[j].strip().startswith(marker)), len(lines))
        body = lines[start:end]
        plain = [ln for ln in body if ln.strip()]
        if lang in SHELL_LANGS or (lang == "" and plain and all(ln.lstrip().startswith("triforge ") for ln in plain)):
            pending, first = "", 0
            for k, ln in enumerate(body, start=start + 1):
                if not pending:
                    first = k
                ln = re.sub(r"^\s*\$ ", "", ln)
                if ln.rstrip().endswith("\\"):
                    pending += ln.rstrip()[:-1] + " "
                    continue
                cmd = " ".join(shlex.split(pending + ln, comments=True))
                pending = ""
                if cmd:
                    out.append((first, cmd))
        i = end + 1
    return out


def _words(cmd: str) -> list[str]:
    words = shlex.split(cmd)
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value prefixes
        words.pop(0)
    return words


def _not_run_reason(words: list[str]) -> str | None:
    for prefix, reason in NOT_RUN.items():
        if words[: len(prefix.split())] == prefix.split():
            return reason
    return None


def _subcommand(args: list[str]) -> tuple[str, ...]:
    names: list[str] = []
    for a in args:
        if a.startswith("-"):
            if names:
                break
            continue  # root options such as --debug
        names.append(a)
        if len(names) == 2:
            break
    return tuple(names)


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))


def test_the_readme_has_commands_and_the_parser_reads_every_shape():
    assert len(COMMANDS) >= 5
    sample = ("x\n```bash\n# a comment\n$ triforge data list   # inline\nFOO=1 triforge \\\n  demo --out d\n```\n"
              "```\ntriforge astra tasks\n```\n```\nnot a command\n```\n```toml\na = 1\n```\n")
    assert readme_commands(sample) == [(4, "triforge data list"), (5, "FOO=1 triforge demo --out d"),
                                       (9, "triforge astra tasks")]


@pytest.fixture(scope="module")
def fresh_folder(tmp_path_factory):
    """An empty working folder outside the checkout, with its own data home and config, holding the demo run
    that the trace commands read (`triforge demo --out runs/demo`)."""
    folder = tmp_path_factory.mktemp("readme")
    env = {**os.environ, "TRIFORGE_DATA_HOME": str(folder / "data-home"), "TRIFORGE_HOME": str(folder / "home"),
           "XDG_CONFIG_HOME": str(folder / "config")}
    for var in ("TRIFORGE_MODEL", "TRIFORGE_BASE_URL", "TRIFORGE_CONFIG", "TRIFORGE_CPBENCH", "TRIFORGE_IFBENCH",
                "TRIFORGE_HOTPOTQA"):
        env.pop(var, None)
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "demo", "--out", "runs/demo"], cwd=folder, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return folder, env


@pytest.mark.parametrize("lineno, cmd", COMMANDS, ids=[f"README.md:{n}" for n, _ in COMMANDS])
def test_readme_command_runs(lineno, cmd, request, capsys, monkeypatch):
    words = _words(cmd)
    if any(w in ("|", "||", "&&", ";", ">", ">>", "<") for w in words):
        pytest.fail(f"README.md:{lineno}: `{cmd}` uses shell syntax this test does not run; split it")
    if not words or not _TRIFORGE.match(words[0]):
        reason = _not_run_reason(words)
        if reason is None:
            pytest.fail(f"README.md:{lineno}: `{cmd}` is neither a triforge command nor in NOT_RUN with a reason")
        pytest.skip(f"not run: {reason}")
    args = words[1:]
    if _subcommand(args) in RUN_FOR_REAL or _subcommand(args)[:1] in RUN_FOR_REAL:
        folder, env = request.getfixturevalue("fresh_folder")
        r = subprocess.run([sys.executable, "-m", "triforge.cli.app", *args], cwd=folder, env=env,
                           capture_output=True, text=True, timeout=300)
        code, out, err = r.returncode, r.stdout, r.stderr
    else:  # in this process: parsing the command line is what is checked
        code, out, err = _in_process([*args, "--help"], capsys, monkeypatch)
        assert "Usage" in out, out
    assert code == 0, f"README.md:{lineno}: `{cmd}` -> exit {code}\n{out[-2000:]}{err[-2000:]}"
    assert "Traceback" not in err


def _in_process(args: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    from triforge.cli.app import main

    for var in ("TRIFORGE_DEBUG", "TRIFORGE_ISOLATION"):  # root options set these; keep them to this test
        monkeypatch.setenv(var, os.environ.get(var, ""))
        monkeypatch.delenv(var)
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("cmd, ok", [
    ("triforge cpagent solve --problem abbots_puzzle --model coder --out runs/x", True),
    ("triforge cpagent solve --problme abbots_puzzle --model coder --out runs/x", False),  # a misspelt option
    ("triforge cpagent slove --problem abbots_puzzle", False),  # a subcommand that does not exist
])
def test_the_help_check_catches_options_and_subcommands_that_do_not_exist(cmd, ok, capsys, monkeypatch):
    code, out, _ = _in_process([*_words(cmd)[1:], "--help"], capsys, monkeypatch)
    assert (code == 0 and "Usage" in out) is ok
