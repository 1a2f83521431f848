"""Candidate format: launch lines, safe expressions, the interface check."""

from __future__ import annotations

import pytest

from triforge.astra.candidate import Candidate, CandidateError, check_interface, kernel_params, resolve_launch
from triforge.astra.task import all_tasks, get_task

SRC = """
// @launch grid: (cdiv(d, 256), num_tokens)
// @launch block: min(d, 256)
// @launch smem: 4 * vec
template <typename T> __global__ void k(T* out, const T* __restrict__ in, int d) {}
"""


def test_launch_lines_are_parsed_and_evaluated():
    c = Candidate.from_source(SRC)
    lc = resolve_launch(c.launch_exprs, {"grid": "1", "block": "1"}, {"d": 1000, "num_tokens": 7, "vec": 8})
    assert lc.grid == (4, 7, 1) and lc.block == (256, 1, 1) and lc.smem == 32


def test_default_launch_applies_without_lines():
    c = Candidate.from_source("template <typename T> __global__ void k(T* o) {}")
    lc = resolve_launch(c.launch_exprs, {"grid": "num_tokens", "block": "min(d, 1024)"}, {"d": 5000, "num_tokens": 3})
    assert lc.grid == (3, 1, 1) and lc.block == (1024, 1, 1)


@pytest.mark.parametrize("expr", ["__import__('os').system('x')", "d ** 2", "open('f')", "[d]", "d.real"])
def test_unsafe_launch_expressions_are_rejected(expr):
    with pytest.raises(CandidateError):
        Candidate.from_source(f"// @launch grid: {expr}\n")


def test_block_over_1024_threads_is_rejected():
    with pytest.raises(CandidateError, match="1024"):
        resolve_launch({"block": "(64, 32)"}, {"grid": "1", "block": "1"}, {})


def test_unknown_name_is_reported():
    with pytest.raises(CandidateError, match="unknown name 'hidden'"):
        resolve_launch({"grid": "hidden"}, {"grid": "1", "block": "1"}, {"d": 1})


def test_kernel_params_normalize_qualifiers_and_names():
    src = "template <typename T> __global__ void f(T* __restrict__ a, const T *b, int n, const float eps) {}"
    assert kernel_params(src, "f") == ["T*", "T*", "int", "float"]


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_every_baseline_matches_its_own_interface_and_default_launch(name):
    t = get_task(name)
    check_interface(t.baseline_source(), t.baseline_source(), t.entry)
    assert Candidate.from_source(t.baseline_source()).launch_exprs == {
        k: v for k, v in t.default_launch.items() if k in ("grid", "block", "smem")}
    assert len(kernel_params(t.baseline_source(), t.entry)) == len(t.params)


def test_interface_mismatch_is_caught():
    t = get_task("silu_and_mul")
    bad = t.baseline_source().replace("const T* __restrict__ input, int d)", "const T* __restrict__ input, long d)")
    with pytest.raises(CandidateError, match="differs"):
        check_interface(bad, t.baseline_source(), t.entry)
    untemplated = t.baseline_source().replace("template <typename T>\n__global__ void silu_and_mul_kernel(T*",
                                              "__global__ void silu_and_mul_kernel(float*").replace("const T* __restrict__ input",
                                                                                                   "const float* __restrict__ input")
    with pytest.raises(CandidateError):
        check_interface(untemplated, t.baseline_source(), t.entry)


def test_the_documented_example_is_a_valid_candidate():
    from pathlib import Path

    from triforge.astra.check_host import precheck

    doc = (Path(__file__).resolve().parents[2] / "docs" / "astra.md").read_text()
    start = doc.index("```cuda") + len("```cuda")
    example = doc[start: doc.index("```", start)]
    assert precheck("silu_and_mul", example) is None
    c = Candidate.from_source(example)
    assert resolve_launch(c.launch_exprs, get_task("silu_and_mul").default_launch, {"num_tokens": 3, "d": 7}).block == (256, 1, 1)
