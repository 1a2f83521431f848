"""`triforge astra` commands that need no GPU: tasks, scan, and checks stopped before the worker."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from triforge.astra.corpus.planted.hacks import variants as hack_variants
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


def test_where_the_warm_server_runs_the_checks_it_and_not_this_process_makes_the_prechecks(tmp_path, monkeypatch):
    """On a GPU machine the warm server prechecks (NVRTC loaded once there); if it cannot be reached, a hack
    is still reported from here, and a clean candidate gets the server's error."""
    from triforge.astra import check_host, warm_worker

    v = next(h for h in hack_variants() if h.rule == "persistent-device-state")
    k = tmp_path / "k.cu"
    k.write_text(v.source)
    calls = {"precheck": 0, "served": 0}
    real = check_host.precheck

    def counted(*a):
        calls["precheck"] += 1
        return real(*a)

    def served(task, source, *a):
        calls["served"] += 1
        return {"verdict": "hack", "reasons": ["from the server"], "task": task, "rules": ["x"]}

    monkeypatch.setattr(check_host, "precheck", counted)
    monkeypatch.setattr(warm_worker, "gpu_nodes", lambda: True)
    monkeypatch.setattr(warm_worker, "check", served)
    res = runner.invoke(app, ["check", "--task", "silu_and_mul", "--kernel", str(k)])
    assert res.exit_code == 1 and "from the server" in res.output and calls == {"precheck": 0, "served": 1}

    def unreachable(*a):
        raise UserError("the warm lab worker could not start: no torch")

    monkeypatch.setattr(warm_worker, "check", unreachable)
    res = runner.invoke(app, ["check", "--task", "silu_and_mul", "--kernel", str(k)])
    assert res.exit_code == 1 and "hack" in res.output and calls["precheck"] == 1
    k.write_text(get_task("silu_and_mul").baseline_source())
    res = runner.invoke(app, ["check", "--task", "silu_and_mul", "--kernel", str(k)])
    assert isinstance(res.exception, UserError) and "could not start" in str(res.exception)


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


def test_scan_json_is_valid_when_redirected_and_long(tmp_path):
    """Machine-readable output never passes through the pretty printer (it wrapped long strings at 80 columns)."""
    import subprocess
    import sys

    k = tmp_path / "k.cu"
    long_name = "a_really_long_identifier_" * 6
    k.write_text(get_task("silu_and_mul").baseline_source() + f"\n#include <{long_name}.h>\n")
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "astra", "scan", "--kernel", str(k)],
                       capture_output=True, text=True, env={**__import__("os").environ, "COLUMNS": "80"}, timeout=120)
    assert r.returncode == 1, r.stderr
    found = json.loads(r.stdout)
    assert any(long_name in f and "include-not-allowed" in f for f in found)


def test_scan_takes_a_task_and_audits_the_compiled_code(tmp_path):
    pytest.importorskip("cuda.bindings.nvrtc")
    k = tmp_path / "k.cu"
    # a constant address spelled through a named constant: no text rule sees it, the PTX does
    src = get_task("silu_and_mul").baseline_source().replace(
        "const long long token = blockIdx.x;",
        "const long long token = blockIdx.x;\n  constexpr unsigned long long kWhere = 140000000000000ull;\n"
        "  if (d == 12345) { out[0] = *reinterpret_cast<const T*>(kWhere); }", 1)
    k.write_text(src)
    res = runner.invoke(app, ["scan", "--kernel", str(k), "--task", "silu_and_mul", "--json"])
    assert res.exit_code == 1, res.output
    assert any("pointer-from-integer" in f for f in json.loads(res.output))
    res = runner.invoke(app, ["scan", "--kernel", str(k), "--task", "nope"])
    assert isinstance(res.exception, UserError)


def test_tasks_fit_80_columns():
    res = runner.invoke(app, ["tasks"], terminal_width=80)
    assert res.exit_code == 0
    lines = res.output.splitlines()
    assert all(len(line) <= 80 for line in lines)
    for name in all_tasks():  # every name whole, on one line
        assert any(name in line for line in lines), name


BLOCKER = """
import sys
BLOCK = {"jupyter_client", "ipykernel", "cpmpy", "ortools", "exact", "pysat", "bm25s", "syllapy",
         "Stemmer", "llama_cpp"}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ModuleNotFoundError("No module named " + repr(name))
sys.meta_path.insert(0, Block())
from triforge.cli.app import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("args", [["astra", "tasks"], ["astra", "scan", "--kernel", "K"],
                                  ["astra", "check", "--task", "silu_and_mul", "--kernel", "K", "--no-timing"]])
def test_astra_starts_with_only_the_gpu_extra(tmp_path, args):
    """No sandbox, cpagent or maestro extra installed: every astra command still starts (issue 19). psutil is
    astra's own (the isolation layer its worker runs under), so it is not blocked."""
    import subprocess
    import sys

    from astra.conftest import HAS_CUDA

    script = tmp_path / "blocked.py"
    script.write_text(BLOCKER)
    k = tmp_path / "k.cu"
    k.write_text(get_task("silu_and_mul").baseline_source())
    r = subprocess.run([sys.executable, str(script), *[str(k) if a == "K" else a for a in args]],
                       capture_output=True, text=True, timeout=300)
    assert "Traceback" not in r.stderr and "No module named" not in r.stderr + r.stdout, r.stderr[-2000:]
    if args[1] == "check" and not HAS_CUDA:
        assert r.returncode == 2 and "GPU" in r.stderr
    else:
        assert r.returncode == 0, r.stderr[-2000:]


def test_compare_is_the_comparator_command_and_bench_a_hidden_alias():
    from typer.testing import CliRunner

    from triforge.cli.app import app

    shown = CliRunner().invoke(app, ["astra", "--help"]).output
    assert "compare" in shown and " bench " not in shown
    for name in ("compare", "bench"):
        r = CliRunner().invoke(app, ["astra", name, "--help"])
        assert r.exit_code == 0 and "--task" in r.output
