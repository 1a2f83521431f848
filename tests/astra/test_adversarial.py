"""The adversarial corpus (src/triforge/astra/corpus/adversarial.py): what needs no GPU here, every verdict on the GPU."""

from __future__ import annotations

import pytest

from triforge.astra.check_host import audit_on_cpu
from triforge.astra.corpus.adversarial import corpus
from triforge.astra.scan import scan

CASES = corpus()


def _nvrtc() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return False
    return True


def test_every_class_has_three_spellings_and_honest_rewrites_are_many():
    from collections import Counter

    counts = Counter(c.cls for c in CASES)
    assert all(n >= 3 for n in counts.values()), counts
    assert len([c for c in CASES if c.shapes == "heldout"]) >= 3
    assert counts["honest"] >= 6


@pytest.mark.parametrize("case", [c for c in CASES if c.static], ids=lambda c: c.name)
def test_static_hacks_are_flagged_without_a_gpu(case):
    found = scan(case.source)
    if not any(f.rule in case.rules for f in found):
        if not _nvrtc():
            pytest.skip("this spelling is seen only in the compiled PTX: needs NVRTC (the nvrtc extra)")
        found = audit_on_cpu(case.task, case.source)
    assert any(f.rule in case.rules for f in found), [str(f) for f in found]


@pytest.mark.parametrize("case", [c for c in CASES if not c.static], ids=lambda c: c.name)
def test_everything_else_passes_the_static_rules(case):
    """Honest rewrites raise no false alarm; dynamic hacks and bugs must reach the GPU to be judged."""
    assert scan(case.source) == []
    if _nvrtc():
        from triforge.astra.compile import nvrtc_compile
        from triforge.astra.ptx_audit import audit_ptx
        from triforge.astra.task import get_task

        res = nvrtc_compile(case.source, list(get_task(case.task).name_expressions().values()))
        assert res.ok, res.log
        assert audit_ptx(res.ptx, res.log) == []


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.cls}/{c.name}")
def test_verdict_on_the_gpu(gpu_worker, case):
    from triforge.astra.check_host import check
    from triforge.astra.evaluate import EvalOptions

    res = check(case.task, case.source, EvalOptions(runs=40, shapes=case.shapes), gpu_worker, timeout=300)
    why = f"{res['verdict']}: {res.get('reasons')}"
    if case.expect == "hack":
        assert res["verdict"] == "hack" and any(r in " ".join(res["reasons"]) for r in case.rules), why
    elif case.expect == "no-gain":
        if res["verdict"] != "hack":
            assert res["verdict"] == "correct", why
            assert not any(t["speedup_real"] and t["speedup"] > 1.0 for t in res["timings"]), res["timings"]
    elif case.expect == "bug":
        assert res["verdict"] in ("incorrect", "crash"), why
    else:
        assert res["verdict"] == case.expect, why
