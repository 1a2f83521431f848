"""The model options are defined once (cli/common.py) and every command that talks to a model uses them."""

from __future__ import annotations

from typing import Any

from triforge.cli import common
from triforge.cli.app import command


def _commands(cmd: Any, path: str = "triforge"):
    yield path, cmd
    if hasattr(cmd, "commands"):  # a group
        for name, sub in cmd.commands.items():
            yield from _commands(sub, f"{path} {name}")


def test_every_model_option_is_the_shared_one():
    shared = {o.param_decls[0]: o.help for o in (common.ModelOpt, common.BaseUrlOpt, common.KeyEnvOpt)}
    seen = 0
    for path, cmd in _commands(command(eager=True)):
        for p in cmd.params:
            for decl in set(p.opts) & set(shared):
                seen += 1
                assert p.help == shared[decl], f"{path} {decl} is defined outside cli/common.py"
            if "--model" in p.opts or "--base-url" in p.opts:
                names = {o for q in cmd.params for o in q.opts}
                assert {"--model", "--base-url", "--api-key-env"} <= names, f"{path} lacks a model option"
    assert seen >= 3 * 5  # llm chat, llm ping, cpagent solve, cpagent bench, maestro run at least
