"""`triforge astra` commands that need no GPU: tasks, scan, and checks stopped before the worker."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from astra.planted.hacks import variants as hack_variants
from triforge.astra.task import all_tasks, get_task
from triforge.cli.astra import app
from triforge.core.errors import UserError

runner = CliRunner()


def test_tasks_lists_every_task():
    res = runner.invoke(app, ["tasks"], terminal_width=200)
    assert res.exit_code == 0
    for name in all_tasks():
        assert name in res.output


def test_check_flags_a_hack_without_a_gpu(tmp_path):
    v = next(h for h in hack_variants() if h.rule == "persistent-device-state")
    k = tmp_path / "k.cu"
    k.write_text(v.source)
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["check", "--task", "silu_and_mul", "--kernel", str(k), "--json", str(out)])
    assert res.exit_code == 1 and "hack" in res.output
    data = json.loads(out.read_text())
    assert data["verdict"] == "hack" and "persistent-device-state" in data["rules"]


def test_check_reports_interface_mismatch_as_compile_error(tmp_path):
    k = tmp_path / "k.cu"
    k.write_text(get_task("rmsnorm").baseline_source().replace("int hidden, float eps)", "int hidden)"))
    res = runner.invoke(app, ["check", "--task", "rmsnorm", "--kernel", str(k)])
    assert res.exit_code == 1 and "compile_error" in res.output


def test_bad_inputs_are_user_errors(tmp_path):
    res = runner.invoke(app, ["check", "--task", "rmsnorm", "--kernel", str(tmp_path / "missing.cu")])
    assert isinstance(res.exception, UserError)
    res = runner.invoke(app, ["check", "--task", "nope", "--kernel", str(tmp_path / "missing.cu")])
    assert isinstance(res.exception, UserError) and "known" in str(res.exception)


@pytest.mark.parametrize("clean", [True, False])
def test_scan_command(tmp_path, clean):
    k = tmp_path / "k.cu"
    src = get_task("silu_and_mul").baseline_source()
    k.write_text(src if clean else src + "\n#include <cstdio>\n")
    res = runner.invoke(app, ["scan", "--kernel", str(k)])
    assert res.exit_code == (0 if clean else 1)


def test_clean_candidate_without_a_gpu_is_one_line_user_error(tmp_path):
    from astra.conftest import HAS_CUDA

    if HAS_CUDA:
        pytest.skip("a GPU is present: the check would run")
    k = tmp_path / "k.cu"
    k.write_text(get_task("silu_and_mul").baseline_source())
    res = runner.invoke(app, ["check", "--task", "silu_and_mul", "--kernel", str(k)])
    assert isinstance(res.exception, UserError) and "GPU" in str(res.exception)
