"""`triforge doctor`: what isolation model-written code gets on this machine, read back from /proc."""

from __future__ import annotations

import typer

from triforge.cli.common import console
from triforge.confine.isolation import IsolationPolicy, IsolationUnavailable, mechanism
from triforge.confine.seccomp import seccomp_filter


def doctor() -> None:
    """Start a sandboxed kernel and a one-shot program and print the isolation each really has."""
    from triforge.confine.run import verified
    from triforge.sandbox.kernel_sandbox import KernelSandbox

    policy = IsolationPolicy.from_env()
    mech = mechanism()
    if not policy.enabled:  # one sentence: nothing confines the code, whatever this machine could use
        could = f"this machine could use {mech.name}" if mech.available else f"none is available here: {mech.why_not}"
        console.print(f"isolation turned off (--isolation none): model-written code runs unprotected, with no "
                      f"namespaces and no seccomp filter ({could})", style="bold red", highlight=False)
        raise typer.Exit(1)
    console.print(f"mechanism: {mech.name}" + (f" ({mech.why_not})" if mech.why_not else ""), highlight=False,
                  soft_wrap=True)
    second = seccomp_filter()
    if second.available:
        console.print(second.describe(), highlight=False, soft_wrap=True)
    else:  # the namespaces hold without it: a warning, not a failure
        console.print(f"{second.describe()}: the namespaces hold without this second layer", style="yellow",
                      highlight=False, soft_wrap=True)
    failed = False
    try:
        console.print(f"one-shot programs: {verified(policy).confinement()}", highlight=False, soft_wrap=True)
        with KernelSandbox(timeout=30) as sb:
            console.print(f"kernel cells: {sb.isolation.summary()}", highlight=False, soft_wrap=True)
    except IsolationUnavailable as exc:
        console.print(f"NOT isolated: {exc}", style="bold red", highlight=False, soft_wrap=True)
        failed = True
    if failed:
        raise typer.Exit(1)
    console.print("isolation holds: no network, the host read-only except the working folder and a private "
                  "/tmp, home hidden, own PID namespace, no capabilities" + (", seccomp filter" if second.available
                                                                             else ""),
                  style="green", highlight=False, soft_wrap=True)
