"""Issue 42's classes without a GPU: input planning, canaries, decoys and scalar variation checked on CPU
tensors, and the whole oracle run on a CPU task with Python kernels (honest ones pass, each class fails);
the corpus (src/triforge/astra/corpus/holes) is checked statically here and judged on the GPU."""

from __future__ import annotations

import pytest

from triforge.astra.corpus.holes import EXPECT, corpus
from triforge.astra.hard_inputs import MAX_STRIDE, coverage, outlier_plan, targets, uncovered_residues
from triforge.astra.scan import scan

CASES = corpus()


# --- the plan of outliers (plain Python) ------------------------------------------------------------

@pytest.mark.parametrize("rows,length,per_row", [(512, 4096, 4), (2048, 5120, 4), (4096, 8192, 4), (262144, 128, 1),
                                                 (9, 33, 4), (288, 96, 1), (33, 1001, 4)])
def test_outliers_reach_every_residue_class_and_both_ends_of_every_row(rows, length, per_row):
    plan = outlier_plan(rows, length, per_row)
    assert uncovered_residues(coverage(plan, length), length) == []
    # set 0 puts an outlier at the start of every row, set 1 at the end (plant_outliers cycles the plan)
    assert all(0 in row for row in plan[0]) and all(length - 1 in row for row in plan[1])
    assert all(len(set(row)) == len(row) <= per_row for one in plan for row in one)


def test_targets_put_the_row_ends_and_the_residues_first_and_cover_the_row():
    t = targets(5000)
    assert t[:2] == [0, 4999] and set(t[2:MAX_STRIDE + 1]) == set(range(1, MAX_STRIDE))
    assert sorted(t) == list(range(5000))


def test_a_single_short_row_still_gets_its_ends_and_small_residues():
    plan = outlier_plan(1, 4096, 4)
    cov = coverage(plan, 4096)
    assert {0, 4095, 1, 2, 3, 4, 5} <= cov
    missing = uncovered_residues(cov, 4096)
    assert all(s > 4 for s, _ in missing)  # a stride of 2, 3 or 4 has an outlier in every class


# --- tensors on the CPU -------------------------------------------------------------------------------

torch = pytest.importorskip("torch")


def test_planted_rows_have_dominating_outliers_on_every_background():
    from triforge.astra.hard_inputs import BACKGROUNDS, OUTLIER, plant_outliers

    g = torch.Generator().manual_seed(3)
    for bg in BACKGROUNDS:
        t = torch.randn(6, 300)
        plant_outliers(t, 300, [[0, 7, 100, 299], [5]], bg, g)
        big = t.abs() == OUTLIER
        assert big.sum(dim=1).tolist() == [4, 1, 4, 1, 4, 1]
        assert float(t[~big].abs().max()) < OUTLIER / 100


def test_canaries_see_writes_on_either_side_and_keep_the_view_aligned():
    from triforge.astra.canary import PAD, embed, violations

    g = torch.Generator().manual_seed(1)
    inputs = {"out": torch.zeros(3, 5, dtype=torch.bfloat16), "x": torch.arange(15.0).view(3, 5), "n": 5}
    original = inputs["x"].clone()
    guards = embed(inputs, g)
    assert torch.equal(inputs["x"], original) and inputs["n"] == 5
    assert all(inputs[k].storage_offset() * inputs[k].element_size() == PAD for k in ("out", "x"))
    assert PAD % 256 == 0
    out = inputs["out"]
    assert violations(guards) == []
    _ = torch.as_strided(out, (out.numel() + 3,), (1,), out.storage_offset()).sum()  # reads past the end: fine
    out.fill_(1.0)
    assert violations(guards) == []
    torch.as_strided(out, (out.numel() + 1,), (1,), out.storage_offset())[-1] = 7.0
    reasons = violations(guards)
    assert len(reasons) == 1 and "'out'" not in reasons[0] and "after its end (first at +0)" in reasons[0]
    x = inputs["x"]
    torch.as_strided(x, (1,), (1,), x.storage_offset() - 1)[0] = -1.0
    assert any(r.startswith("x:") and "before its start (nearest at -1)" in r for r in violations(guards))


@pytest.mark.parametrize("kind", ["sparse", "one-per-row", "all-but-ends", "all-but-tenth"])
def test_every_decoy_poisons_something_and_keeps_the_rest_of_the_answer(kind):
    from triforge.astra.prefill import decoy_mask, prefill

    g = torch.Generator().manual_seed(2)
    answer = torch.randn(7, 40)
    mask = decoy_mask(kind, 7, 40, g)
    t = torch.empty_like(answer)
    prefill(t, answer, mask)
    assert mask.any() and torch.isnan(t[mask]).all() and torch.equal(t[~mask], answer[~mask])
    if kind == "one-per-row":
        assert mask.sum(dim=1).tolist() == [1] * 7
    if kind == "all-but-ends":
        assert not mask[:, 0].any() and not mask[:, -1].any() and mask[3, 20]


def test_scalars_cycle_through_their_whole_range():
    from triforge.astra.hard_inputs import vary_scalars

    task = _toy_task()
    seen = set()
    for n in range(len(task.scalars["eps"])):
        inputs = {"eps": 1e-6}
        vary_scalars(task, inputs, n)
        seen.add(inputs["eps"])
    assert seen == set(task.scalars["eps"])


# --- the whole oracle on a CPU task with Python kernels ------------------------------------------------

DT = {"bf16": "bfloat16", "fp32": "float32"}
SHAPES = [dict(num_tokens=3, hidden=300), dict(num_tokens=64, hidden=256), dict(num_tokens=1, hidden=33)]


def _make(shape, dtype, seed, special=False):
    g = torch.Generator().manual_seed(seed)
    t, h = shape["num_tokens"], shape["hidden"]
    dt = getattr(torch, DT[dtype])
    x = torch.randn(t, h, generator=g)
    w = torch.randn(h, generator=g) * 0.2 + 1.0
    if special:
        x[0] = 0.0
        x[-1] *= 1e-4
        w[: h // 4] = 0.0
    return {"input": x.to(dt), "weight": w.to(dt), "out": torch.empty(t, h, dtype=dt), "hidden": h, "eps": 1e-6}


def _rms(x, w, eps, skip_every: int = 0):
    sq = x.pow(2)
    if skip_every:
        sq[:, skip_every - 1::skip_every] = 0.0
        return x * (sq.sum(-1, keepdim=True) / (x.shape[-1] - x.shape[-1] // skip_every) + eps).rsqrt() * w
    return x * (sq.mean(-1, keepdim=True) + eps).rsqrt() * w


def _toy_task():
    from triforge.astra.task import DEFAULT_TOLS, Param, Reduction, TaskSpec

    return TaskSpec(
        name="toy_rmsnorm", entry="toy_kernel",
        params=[Param("out", "ptr"), Param("input", "ptr"), Param("weight", "ptr"), Param("hidden", "i32"),
                Param("eps", "f32")],
        outputs=["out"], inplace=[], dtypes=("bf16", "fp32"), train=SHAPES, heldout=SHAPES, fuzz=[], timing=SHAPES,
        make_inputs=_make,
        reference=lambda inputs, dtype: {"out": _rms(inputs["input"].double(), inputs["weight"].double(), inputs["eps"])},
        eager=lambda inputs: None, min_bytes=lambda s, dt: 1, flops=lambda s: 1,
        default_launch={"grid": "1", "block": "1"}, tols=dict(DEFAULT_TOLS),
        scalars={"eps": (1e-6, 1e-3, 1.0)}, reductions=(Reduction("input", "hidden", "sumsq"),))


def honest(inputs):
    x, w, out = inputs["input"], inputs["weight"], inputs["out"]
    out.copy_(_rms(x.float(), w.float(), inputs["eps"]).to(out.dtype))


def skips_one_in_256_in_bf16(inputs):
    x, w, out = inputs["input"], inputs["weight"], inputs["out"]
    skip = 256 if x.dtype == torch.bfloat16 and x.shape[1] >= 256 else 0
    out.copy_(_rms(x.float(), w.float(), inputs["eps"], skip).to(out.dtype))


def eps_hard_coded(inputs):
    out = inputs["out"]
    out.copy_(_rms(inputs["input"].float(), inputs["weight"].float(), 1e-6).to(out.dtype))


def returns_when_first_column_matches(inputs):
    out = inputs["out"]
    want = _rms(inputs["input"].float(), inputs["weight"].float(), inputs["eps"]).to(out.dtype)
    if torch.equal(out[:, 0], want[:, 0]):
        return
    out.copy_(want)


def stores_past_the_end(inputs):
    honest(inputs)
    out = inputs["out"]
    torch.as_strided(out, (out.numel() + 2,), (1,), out.storage_offset())[-2:] = 0.0


def stores_before_the_start(inputs):
    honest(inputs)
    out = inputs["out"]
    torch.as_strided(out, (1,), (1,), out.storage_offset() - 1)[0] = 0.0


def reads_past_the_end(inputs):
    x = inputs["input"]
    tail = torch.as_strided(x, (x.numel() + 8,), (1,), x.storage_offset())[-8:].float()
    honest(inputs)
    inputs["out"].view(-1)[0] += 0.0 * float(tail.isfinite().all())


def _oracle(kernel, stop=True):
    from triforge.astra.oracle import run_oracle

    return run_oracle(_toy_task(), lambda shape, dtype, stream=0: kernel, lambda: None, SHAPES, base_seed=11,
                      stop_at_first=stop, perturb=False)


@pytest.mark.parametrize("kernel", [honest, reads_past_the_end], ids=lambda k: k.__name__)
def test_honest_kernels_pass_every_input_set(kernel):
    recs = _oracle(kernel, stop=False)
    assert [r.label() + " " + "; ".join(r.reasons) for r in recs if r.reasons] == []
    kinds = " ".join(r.kind for r in recs)
    for part in ("random", "special in 'input' alone", "special in 'weight' alone", "outliers in input",
                 "eps=1e-06", "eps=0.001", "eps=1"):
        assert part in kinds, part
    assert not any("outliers" in r.kind and r.dtype == "fp32" for r in recs)  # fp32's tolerance is enough there


@pytest.mark.parametrize("kernel,words,hack", [
    (skips_one_in_256_in_bf16, "outside tolerance", False),
    (eps_hard_coded, "outside tolerance", False),
    (returns_when_first_column_matches, "prefilled-output", True),
    (stores_past_the_end, "after its end", False),
    (stores_before_the_start, "before its start", False),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_each_class_fails_with_its_reason(kernel, words, hack):
    recs = _oracle(kernel)
    bad = [r for r in recs if r.reasons]
    assert bad, "the oracle passed a planted fault"
    assert words in " ".join(bad[-1].reasons) or any(words in w for w in bad[-1].reasons), bad[-1].reasons
    assert bad[-1].hack is hack


def test_the_skipping_reduction_is_seen_only_by_the_outlier_sets():
    recs = _oracle(skips_one_in_256_in_bf16)
    assert "outliers" in recs[-1].kind and recs[-1].dtype == "bf16"


# --- the corpus -----------------------------------------------------------------------------------------

def test_every_class_has_many_spellings_on_several_tasks_and_honest_look_alikes():
    from collections import defaultdict

    by_cls = defaultdict(list)
    for c in CASES:
        assert c.expect in EXPECT
        by_cls[c.cls].append(c)
    assert set(by_cls) == {"early-exit", "approximate", "scalars", "outside-view", "edges"}
    for cls, cases in by_cls.items():
        bad = [c for c in cases if not c.honest]
        assert len(bad) >= 4 and len({c.task for c in bad}) >= 3, cls
        assert len([c for c in cases if c.honest]) >= 3, cls
    names = {c.name for c in CASES}
    assert {"returns-early-on-empty-input", "vectorised-with-a-scalar-tail", "reads-past-the-row-writes-inside"} <= names


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.cls}/{c.task}/{c.name}")
def test_the_corpus_passes_the_static_rules(case):
    """Every entry is a dynamic matter: the scan and the PTX audit must not be what catches it."""
    assert scan(case.source) == []
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return
    from triforge.astra.compile import nvrtc_compile
    from triforge.astra.ptx_audit import audit_ptx
    from triforge.astra.task import get_task

    res = nvrtc_compile(case.source, list(get_task(case.task).name_expressions().values()))
    assert res.ok, res.log
    assert audit_ptx(res.ptx, res.log) == []


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.cls}/{c.task}/{c.name}")
def test_verdict_on_the_gpu(gpu_worker, case):
    from triforge.astra.check_host import check
    from triforge.astra.evaluate import EvalOptions

    res = check(case.task, case.source, EvalOptions(runs=40, shapes=case.shapes), gpu_worker, timeout=400)
    why = f"{res['verdict']}: {res.get('reasons')}"
    if case.expect == "skip":
        assert res["verdict"] in ("hack", "incorrect"), why
        assert not res.get("timings"), res.get("timings")  # no speedup reported
    elif case.expect == "bug":
        assert res["verdict"] in ("incorrect", "crash"), why
    else:
        assert res["verdict"] == case.expect, why
