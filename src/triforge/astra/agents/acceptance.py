"""The acceptance rule: the lab decides, not the agents.

A candidate is kept only when its verdict is `correct` (train, fuzz and the testing agent's shapes) and
it is faster than the current best on the timing shapes by more than the measurement noise. Both are
timed against the task's baseline in their own sessions, so the ratio of their speedups compares them;
per shape its noise is the sum of the two sessions' A/A spreads, and as in the lab a difference counts
only beyond three times the noise. Accepted: faster beyond that on at least one timing shape, slower
beyond it on none, and faster over all (geometric mean). A noisy shape (a launch-bound decode batch)
then neither blocks a real gain elsewhere nor lends a gain of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from triforge.astra.lab import CheckResult, geomean

NOISE_FACTOR = 3.0


@dataclass
class Decision:
    accepted: bool
    reason: str
    gain: float | None = None  # geometric mean over timing shapes of speedup(candidate) / speedup(best)


def decide(result: dict[str, Any], best: dict[str, Any], best_id: str) -> Decision:
    cand = CheckResult.from_dict(result)
    if not cand.correct:
        why = cand.reasons[0] if cand.reasons else "no reason given"
        return Decision(False, f"{cand.verdict}: {why[:400]}")
    ref = CheckResult.from_dict(best)
    by_shape = {t.shape: t for t in ref.timings}
    pairs = [(t, by_shape[t.shape]) for t in cand.timings if t.shape in by_shape]
    if not pairs:
        return Decision(False, "correct but not timed: nothing to compare with the best")
    ratios = [c.speedup / b.speedup for c, b in pairs]
    limits = [NOISE_FACTOR * (c.aa_spread + b.aa_spread) for c, b in pairs]
    gain = geomean(ratios)
    for (c, _), r, lim in zip(pairs, ratios, limits, strict=True):
        if r < 1.0 - lim:
            return Decision(False, f"slower than {best_id} on {c.shape}: x{r:.3f} (noise limit {100 * lim:.2f}%)", gain)
    real = [c.shape for (c, _), r, lim in zip(pairs, ratios, limits, strict=True) if r - 1.0 > lim]
    if not real or gain <= 1.0:
        return Decision(False, f"not faster than {best_id} beyond noise on any timing shape: x{gain:.3f} "
                               f"(limits {', '.join(f'{100 * lim:.2f}%' for lim in limits)})", gain)
    return Decision(True, f"faster than {best_id}: x{gain:.3f}, beyond noise on {', '.join(real)}", gain)
