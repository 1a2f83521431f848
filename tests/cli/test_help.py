"""--help of every command: flags without a `<bool>` type, groups described by what they do."""

from __future__ import annotations

import pytest

from triforge.cli.app import command


def _paths(cmd, prefix=()):
    yield prefix
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        yield from _paths(sub, (*prefix, name))


def _help(capsys, path) -> str:
    with pytest.raises(SystemExit) as e:
        command()(args=[*path, "--help"], prog_name="triforge")
    assert e.value.code == 0
    return capsys.readouterr().out


def test_no_help_page_shows_a_bool_type_on_a_flag(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    paths = list(_paths(command(eager=True)))
    assert len(paths) > 20 and ("cpagent", "solve") in paths
    for path in paths:
        text = _help(capsys, path)
        assert "Usage:" in text and "--help" in text, path
        assert "<bool>" not in text, f"triforge {' '.join(path)} --help shows <bool>"
    assert "<path>" in _help(capsys, ("cpagent", "solve"))  # options that take a value keep their type


def test_groups_say_what_they_do_and_maestro_lists_its_programs(capsys, monkeypatch):
    from triforge.maestro.programs import SEED_NAMES

    monkeypatch.setenv("COLUMNS", "200")
    root = _help(capsys, ())
    for group in ("cpagent", "astra", "maestro"):
        assert f"{group} commands." not in root
    assert "constraint problem" in root and "CUDA kernels" in root
    maestro = " ".join(_help(capsys, ("maestro",)).split())
    assert all(name in maestro for name in SEED_NAMES) and "Built-in programs" in maestro
