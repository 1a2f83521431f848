"""The static anti-hack scan: every hack class fires its rule; baselines and rewrites stay clean."""

from __future__ import annotations

import pytest

from triforge.astra.corpus.planted.variants import all_variants
from triforge.astra.scan import scan
from triforge.astra.task import all_tasks, get_task

VARIANTS = all_variants()
DYNAMIC = {"timed-output-mismatch", "implausible-speed", "event-host-mismatch", "work-not-proportional",
           "prefilled-output"}
HACKS = [v for v in VARIANTS if v.kind == "hack" and v.rule not in DYNAMIC]
CLEAN = [v for v in VARIANTS if v.kind != "hack"]


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_baselines_are_clean(name):
    assert scan(get_task(name).baseline_source()) == []


@pytest.mark.parametrize("v", CLEAN, ids=[f"{v.task}/{v.name}" for v in CLEAN])
def test_faults_and_rewrites_are_not_flagged(v):
    assert scan(v.source) == []


@pytest.mark.parametrize("v", HACKS, ids=[v.name for v in HACKS])
def test_each_hack_fires_its_rule(v):
    rules = {f.rule for f in scan(v.source)}
    assert v.rule in rules, rules


def test_every_static_rule_has_a_planted_hack():
    from triforge.astra.scan import _RULES

    planted = {v.rule for v in HACKS}
    static_rules = {r for r, _, _ in _RULES} | {"include-not-allowed", "ptx-not-allowed", "ptx-special-register",
                                                "persistent-device-state"}
    assert static_rules <= planted, static_rules - planted


def test_comments_do_not_trigger_rules():
    src = "// we never call clock64() or cudaDeviceSynchronize here\n/* cudaStream_t s; */\n__global__ void k() {}"
    assert scan(src) == []


def test_allowed_inline_ptx_is_clean_and_special_registers_are_not():
    ok = 'float y; asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));'
    assert scan(ok) == []
    bad = 'unsigned r; asm("mov.u32 %0, %%smid;" : "=r"(r));'
    assert {f.rule for f in scan(bad)} == {"ptx-special-register"}


def test_findings_carry_line_numbers():
    found = scan("\n\n#include <cstdio>\n")
    assert found[0].line == 3 and "cstdio" in str(found[0])


def test_device_functions_and_constants_are_not_state():
    src = ("__device__ __forceinline__ float f(float x) { return x; }\n"
           "__constant__ float k[4] = {1, 2, 3, 4};\n"
           "template <typename T> __device__ T g(T x);\n")
    assert scan(src) == []
