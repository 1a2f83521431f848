"""Every command's --help reads in sections: each option sits in a named panel, run commands share theirs."""

from __future__ import annotations

import re

import pytest

from triforge.cli.app import command

RUN_COMMANDS = {("cpagent", "solve"), ("cpagent", "bench"), ("astra", "optimize"), ("maestro", "run"),
                ("maestro", "optimize"), ("maestro", "compare")}
SHARED = {"--model": "Model", "--base-url": "Model", "--api-key-env": "Model", "--out": "Run directory",
          "--cache": "Run directory", "--executor": "Fan-out", "--max-calls": "Limits", "--max-rollouts": "Limits",
          "--budget-usd": "Limits", "--isolation": "Isolation"}


def _commands(cmd, prefix=()):
    yield prefix, cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        yield from _commands(sub, (*prefix, name))


def _help(capsys, path) -> str:
    with pytest.raises(SystemExit) as e:
        command()(args=[*path, "--help"], prog_name="triforge")
    assert e.value.code == 0
    return capsys.readouterr().out


def _panels(text: str) -> list[str]:
    return re.findall(r"╭─ (.+?) ─", text)


def test_every_option_of_every_command_is_in_a_named_panel(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    root = command(eager=True)
    cmds = list(_commands(root))
    assert {p for p, _ in cmds} >= RUN_COMMANDS
    for path, cmd in cmds:
        text = _help(capsys, path)
        panels = _panels(text)
        assert "Options" not in panels, f"triforge {' '.join(path)} --help has options outside a section"
        visible = [p for p in cmd.params if getattr(p, "param_type_name", "") == "option" and not p.hidden]
        for p in visible:
            assert getattr(p, "rich_help_panel", None), (path, p.opts)
            want = next((SHARED[o] for o in p.opts if o in SHARED), None)
            assert want is None or p.rich_help_panel == want, (path, p.opts, p.rich_help_panel)


@pytest.mark.parametrize("path", sorted(RUN_COMMANDS))
def test_run_commands_read_in_the_same_sections(capsys, monkeypatch, path):
    monkeypatch.setenv("COLUMNS", "160")
    command(eager=True)
    panels = _panels(_help(capsys, path))
    for section in ("Model", "Limits", "Run directory"):
        assert section in panels, (path, panels)
