"""The type check of a program, run before any edited program runs, and the graph edit distance.

`typecheck`: the program's own check, a data-flow check that every field a node reads is written on
every path to it (a must-be-written analysis over the edges and validator retries), and a check that
every tool, code or validator function takes the ports and arguments it is given.
"""

from __future__ import annotations

import inspect

from triforge.maestro.interpreter import NodeError, resolve_fn
from triforge.maestro.nodes import ToolNode, ValidateNode
from triforge.maestro.program import Program, ProgramError


class EditError(ValueError):
    """An edit that cannot be applied or that leaves a program that fails its type check."""


def typecheck(p: Program) -> None:
    """Raise EditError when the program would fail before it runs: structure, data flow, function ports."""
    try:
        p.check()
    except ProgramError as e:
        raise EditError(str(e)) from None
    for n in p.nodes:
        if isinstance(n, ToolNode | ValidateNode) or n.kind == "code":
            try:
                fn = resolve_fn(n.fn)  # type: ignore[attr-defined]
            except NodeError as e:
                raise EditError(f"node {n.name!r}: {e}") from None
            params = inspect.signature(fn).parameters
            takes_any = any(x.kind is inspect.Parameter.VAR_KEYWORD for x in params.values())
            extra = set(n.inputs) | set(getattr(n, "args", {}))
            if not takes_any and not extra <= set(params):
                raise EditError(f"node {n.name!r}: {n.fn} takes no parameter(s) "  # type: ignore[attr-defined]
                                f"{sorted(extra - set(params))}")
    unready = _dataflow(p)
    if unready:
        raise EditError(unready)


def _dataflow(p: Program) -> str | None:
    """The first node that may read a field no node has written on some path to it, in words."""
    succ: dict[str, list[str]] = {n.name: [] for n in p.nodes}
    for e in p.edges:
        succ[e.src].append(e.dst)
    for n in p.nodes:
        if isinstance(n, ValidateNode) and n.retry:
            succ[n.name].append(n.retry)
    writes = {n.name: set(n.outputs.values()) for n in p.nodes}
    everything = set(p.state)
    have: dict[str, set[str]] = {n.name: set(everything) for n in p.nodes}
    have[p.entry] = set(p.inputs)
    preds: dict[str, list[str]] = {n.name: [] for n in p.nodes}
    for s, ds in succ.items():
        for t in ds:
            preds[t].append(s)
    reach = _reachable(p.entry, succ)
    changed = True
    while changed:  # must-be-written analysis to a fixed point
        changed = False
        for n in p.nodes:
            if n.name not in reach:
                continue
            sources = [have[q] | writes[q] for q in preds[n.name] if q in reach]
            new = set(p.inputs) if n.name == p.entry else set(everything)
            for s in sources:
                new &= s
            if n.name == p.entry:
                new = set(p.inputs)
            if new != have[n.name]:
                have[n.name], changed = new, True
    for n in p.nodes:
        if n.name not in reach:
            continue
        missing = [f for f in n.inputs.values() if f not in have[n.name]]
        if missing:
            return f"node {n.name!r} may read {missing[0]!r} before any node writes it"
        if not succ[n.name]:
            unwritten = [f for f in p.outputs if f not in have[n.name] | writes[n.name]]
            if unwritten:
                return f"a run ending at {n.name!r} has not written the output {unwritten[0]!r}"
    return None


def _reachable(entry: str, succ: dict[str, list[str]]) -> set[str]:
    seen, todo = set(), [entry]
    while todo:
        x = todo.pop()
        if x not in seen:
            seen.add(x)
            todo.extend(succ[x])
    return seen


def graph_distance(a: Program, b: Program) -> int:
    """Structural edit distance: nodes added or removed, edges added or removed, port bindings changed."""
    na, nb = {n.name: n for n in a.nodes}, {n.name: n for n in b.nodes}
    ea = {(e.src, e.dst, e.when.label() if e.when else "") for e in a.edges}
    eb = {(e.src, e.dst, e.when.label() if e.when else "") for e in b.edges}
    dist = len(set(na) ^ set(nb)) + len(ea ^ eb)
    for name in set(na) & set(nb):
        x, y = na[name], nb[name]
        dist += len(set(x.inputs.items()) ^ set(y.inputs.items())) + len(set(x.outputs.items()) ^ set(y.outputs.items()))
        if type(x) is not type(y):
            dist += 1
    return dist


