"""What a run records about the isolation of its untrusted code: the policy asked for, the mechanism
that holds it here, the seccomp layer, and what held, read back from /proc (`confine.run.verified`).

It goes into the run's config.json and, as an `isolation` event at run start, into its trace, so
trace.jsonl, `triforge trace summary` and trace.html show it (or `NOT isolated (turned off)`).
"""

from __future__ import annotations

from typing import Any

from triforge.confine.isolation import IsolationPolicy
from triforge.core.trace import Tracer

NOT_ISOLATED = "NOT isolated (turned off)"
EVENT = "isolation"  # the span's name and kind


def isolation_record(policy: IsolationPolicy | None = None) -> dict[str, Any]:
    """The policy's record plus `held`; raises `IsolationUnavailable` (one line) when it does not hold here."""
    from triforge.confine.run import verified  # starts a probe once per process and policy

    policy = policy or IsolationPolicy.from_env()
    return {**policy.record(), "held": verified(policy).confinement() if policy.enabled else NOT_ISOLATED}


def trace_isolation(tracer: Tracer, record: dict[str, Any]) -> None:
    """The record as the run's `isolation` event."""
    policy = {k: v for k, v in record.items() if k not in ("mechanism", "seccomp", "held")}
    tracer.event(EVENT, kind=EVENT, **{"triforge.isolation.held": record.get("held"),
                                       "triforge.isolation.mechanism": record.get("mechanism"),
                                       "triforge.isolation.seccomp": record.get("seccomp"),
                                       "triforge.isolation.policy": policy})


def held_in(spans: list[dict[str, Any]]) -> list[str]:
    """What held, per distinct `isolation` event of a trace (a resumed run adds one), oldest first."""
    out: list[str] = []
    for s in spans:
        if s.get("kind") == EVENT:
            held = str(s.get("attributes", {}).get("triforge.isolation.held"))
            if held not in out:
                out.append(held)
    return out
