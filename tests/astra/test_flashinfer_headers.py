"""FlashInfer's kernels built from its headers: finding the headers, one-line errors, the build's cache key.
The build and the comparator columns themselves run on the device (benchmarks/device_astra_speed.sh, PARTS=fi)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from triforge.astra import flashinfer_headers as fi


def _fake_headers(root: Path) -> Path:
    inc = root / "flashinfer" / "data" / "include"
    (inc / "flashinfer").mkdir(parents=True)
    (inc / "flashinfer" / "activation.cuh").write_text("// activation\n")
    (inc / "flashinfer" / "norm.cuh").write_text("// norm\n")
    return inc


def test_the_headers_are_found_from_the_wheel_root_or_the_include_folder(tmp_path, monkeypatch):
    inc = _fake_headers(tmp_path)
    monkeypatch.delenv(fi.ENV, raising=False)
    assert fi.include_dir(None) is None
    assert fi.include_dir(tmp_path) == inc.resolve()
    assert fi.include_dir(inc) == inc.resolve()
    monkeypatch.setenv(fi.ENV, str(tmp_path / "flashinfer"))
    assert fi.include_dir(None) == inc.resolve()


def test_a_folder_without_the_headers_is_an_error_not_an_absent_column(tmp_path):
    with pytest.raises(fi.FlashInferError, match="no flashinfer/activation.cuh"):
        fi.include_dir(tmp_path)


def test_the_digest_follows_the_headers_bytes(tmp_path):
    inc = _fake_headers(tmp_path)
    before = fi.headers_digest(inc)
    (inc / "flashinfer" / "norm.cuh").write_text("// norm, changed\n")
    assert fi.headers_digest(inc) != before


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (no GPU needed)")
def test_headers_that_do_not_compile_are_one_line_naming_the_error(tmp_path):
    inc = _fake_headers(tmp_path)
    (inc / "flashinfer" / "activation.cuh").write_text("#error planted: not FlashInfer\n")
    with pytest.raises(fi.FlashInferError, match="did not build: .*planted"):
        fi.build(inc, "90", tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*.so"))


def test_compare_names_a_wrong_headers_folder_in_one_line_before_asking_for_a_gpu(tmp_path):
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "astra", "compare", "--task", "silu_and_mul",
                        "--flashinfer-include", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    err = (r.stderr + r.stdout).strip()
    assert "no flashinfer/activation.cuh" in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("task_name", fi.TASKS)
def test_the_built_kernels_compute_what_the_task_defines(task_name):
    """On the device, with $TRIFORGE_FLASHINFER_INCLUDE set: FlashInfer's kernel for the task, through the
    built library, within the task's tolerance of the float64 reference on train shapes, bf16 and fp16."""
    pytest.importorskip("torch")
    if fi.include_dir(None) is None:
        pytest.skip(f"${fi.ENV} is not set")
    from triforge.astra.oracle import compare
    from triforge.astra.task import get_task

    launch = fi.kernels(fi.prepared())[task_name]()
    task = get_task(task_name)
    for dtype in ("bf16", "fp16"):
        for i, shape in enumerate(task.train):
            inputs = task.make_inputs(shape, dtype, 100 + i)
            want = task.reference(inputs, dtype)
            launch(inputs)
            for k in task.written:
                bad = task.compare[k](inputs[k], want[k]) if k in task.compare else compare(
                    k, inputs[k], want[k], task.tol(k, dtype), False)
                assert not bad, (task_name, dtype, shape, bad[:2])
