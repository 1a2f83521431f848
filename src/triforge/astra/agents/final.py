"""The final check: the winner and the start kernel on the held-out shapes, and the comparator table.

Both are checked for correctness on the held-out shapes and timed there against the task's baseline;
a winner slower than the start on any held-out shape is reported as such. The comparator table (task
baseline, eager PyTorch, torch.compile, FlashInfer when installed or its headers are named
by $TRIFORGE_FLASHINFER_INCLUDE) is the lab's `bench` of the winner,
with each time as a fraction of the device's measured copy bandwidth (the roofline of these kernels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from triforge.astra.lab import CheckResult

if TYPE_CHECKING:
    from triforge.astra.agents.loop import Optimizer

START = "r0-start"


def final_check(opt: Optimizer, best: str) -> dict[str, Any]:
    items = []
    if best != START:
        items.append((opt.job(f"final-{best}", opt.source_of(best), [], shapes="heldout", time_heldout=True, bench=True),
                      {"round": "final", "plan": {"title": f"final check of {best}"}, "parent": best}))
    items.append((opt.job("final-start", opt.source_of(START), [], shapes="heldout", time_heldout=True,
                           bench=best == START),
                  {"round": "final", "plan": {"title": "final check of the start kernel"}, "parent": START}))
    opt.evaluate_batch(items, reserve=0)
    win_id = f"final-{best}" if best != START else "final-start"
    win = opt.results.get(win_id)
    st = opt.results.get("final-start")
    out: dict[str, Any] = {"winner": best, "notes": []}
    if win is None:
        out["notes"].append("the final check was not run: evaluation budget spent")
        return out
    w = CheckResult.from_dict(win)
    out["verdict"], out["reasons"] = w.verdict, w.reasons[:5]
    if not w.correct:
        out["notes"].append(f"the winner is {w.verdict} on the held-out shapes: do not use it")
    s = CheckResult.from_dict(st) if st else None
    s_by = {t.shape: t for t in (s.timings if s else [])}
    roof = dict(zip([t.shape for t in w.timings], w.roofline(), strict=False))
    rows, slower = [], []
    for t in w.timings:
        st_t = s_by.get(t.shape)
        vs = (st_t.speedup and t.speedup / st_t.speedup) if st_t else None
        noise = 3 * (t.aa_spread + (st_t.aa_spread if st_t else 0.0))
        if vs is not None and vs < 1 - noise:
            slower.append(t.shape)
        rows.append({"shape": t.shape, "baseline_us": t.baseline_us, "winner_us": t.candidate_us,
                     "start_us": st_t.candidate_us if st_t else None, "winner_vs_start": vs,
                     "winner_roofline": roof.get(t.shape)})
    out["heldout"] = rows
    out["slower_than_start_on"] = slower
    if slower:
        out["notes"].append(f"the winner is slower than the start on {', '.join(slower)}")
    bench = win.get("bench")
    if bench:
        start_rows = _start_rows(opt) if best != START else []
        out["comparators"] = bench["rows"] + start_rows
        out["copy_gbs"] = bench.get("copy_gbs")
        out["device"] = bench.get("device")
        out["notes"] += bench.get("notes", [])
    out["notes"] += win.get("notes", [])
    return out


def _start_rows(opt: Optimizer) -> list[dict[str, Any]]:
    """The start kernel on the timing shapes, from its own evaluation (a separate session, same baseline)."""
    r = CheckResult.from_dict(opt.results[START])
    roof = r.roofline()
    return [{"shape": t.shape, "comparator": "start kernel (own session)", "median_us": t.candidate_us,
             "copy_fraction": roof[i] if roof else None, "speedup_vs_baseline": t.speedup, "verified": "ok"}
            for i, t in enumerate(r.timings)]
