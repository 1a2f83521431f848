"""The typed library of graph edits: each takes a program and returns an edited copy, or says why not.

An edit is plain data (`{"op": ..., ...}`), as the reflection model writes it. `apply_edits` applies a
list of them to a copy of the parent (so every node the edits do not touch keeps its config: the
warm start), then type-checks the result (`typecheck`). Anything wrong is an `EditError` with one line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from triforge.maestro.nodes import Edge, LLMNode, Node, ValidateNode, node_from_dict
from triforge.maestro.optimize.typecheck import EditError, typecheck
from triforge.maestro.program import FIELD_TYPES, Program

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")
NEW_KINDS = ("llm", "tool", "code", "retrieve")


def _need(d: dict[str, Any], key: str, op: str) -> Any:
    if key not in d or d[key] in (None, ""):
        raise EditError(f"{op}: missing {key!r}")
    return d[key]


def _ports(spec: Any, what: str) -> dict[str, str]:
    if spec is None:
        return {}
    if isinstance(spec, list | tuple):
        return {str(f): str(f) for f in spec}
    if isinstance(spec, dict):
        return {str(k): str(v) for k, v in spec.items()}
    raise EditError(f"{what} must be a list of fields or a {{port: field}} object, not {type(spec).__name__}")


def _existing(p: Program, name: str, op: str) -> Node:
    try:
        return p.node(str(name))
    except KeyError:
        raise EditError(f"{op}: no node {name!r} (nodes: {', '.join(n.name for n in p.nodes)})") from None


def _fresh_name(p: Program, name: Any, op: str) -> str:
    name = str(name)
    if not _NAME.match(name):
        raise EditError(f"{op}: node name {name!r} must be lower_snake_case")
    if any(n.name == name for n in p.nodes):
        raise EditError(f"{op}: a node named {name!r} already exists")
    return name


def _declare(p: Program, fields: dict[str, str], types: dict[str, Any]) -> None:
    for f in fields.values():
        if f not in p.state:
            t = str(types.get(f, "str"))
            if t not in FIELD_TYPES:
                raise EditError(f"field {f!r}: unknown type {t!r} (known: {', '.join(FIELD_TYPES)})")
            p.state[f] = t


def build_node(p: Program, spec: dict[str, Any], op: str, allowed_fns: set[str]) -> Node:
    """A new node from an edit's spec; its new output fields are declared in the state."""
    if not isinstance(spec, dict):
        raise EditError(f"{op}: 'node' must be an object")
    kind = str(spec.get("kind", "llm"))
    if kind not in NEW_KINDS:
        raise EditError(f"{op}: node kind must be one of {', '.join(NEW_KINDS)}, not {kind!r}")
    name = _fresh_name(p, _need(spec, "name", op), op)
    inputs, outputs = _ports(spec.get("inputs"), "inputs"), _ports(spec.get("outputs"), "outputs")
    d: dict[str, Any] = {"kind": kind, "name": name, "inputs": inputs, "outputs": outputs}
    if kind == "llm":
        d["instruction"] = str(spec.get("instruction", ""))
        for k in ("model", "format", "reasoning", "descriptions"):
            if k in spec:
                d[k] = spec[k]
    elif kind in ("tool", "code"):
        d["fn"] = _allowed_fn(spec.get("fn"), allowed_fns, op)
        d["args"] = dict(spec.get("args") or {})
    else:
        d["k"], d["corpus"] = int(spec.get("k", 5)), str(spec.get("corpus", "default"))
    try:
        node = node_from_dict(d)
    except (TypeError, ValueError) as e:
        raise EditError(f"{op}: {e}") from None
    _declare(p, outputs, dict(spec.get("types") or {}))
    return node


def _allowed_fn(fn: Any, allowed: set[str], op: str) -> str:
    fn = str(fn or "")
    if fn not in allowed:
        raise EditError(f"{op}: function {fn!r} is not in the tool library (have: {', '.join(sorted(allowed)) or 'none'})")
    return fn


def _read_outputs(node: Node, readers: list[Node]) -> None:
    for r in readers:
        for f in node.outputs.values():
            if f not in r.inputs.values():
                r.inputs[f] = f


def _splice_before(p: Program, new: Node, target: str) -> None:
    for e in p.edges:
        if e.dst == target:
            e.dst = new.name
    for n in p.nodes:
        if isinstance(n, ValidateNode) and n.retry == target:
            n.retry = new.name
    if p.entry == target:
        p.entry = new.name
    p.nodes.insert(next(i for i, n in enumerate(p.nodes) if n.name == target), new)
    p.edges.append(Edge(new.name, target))


def _splice_after(p: Program, new: Node, target: str) -> None:
    for e in p.edges:
        if e.src == target:
            e.src = new.name
    p.nodes.insert(next(i for i, n in enumerate(p.nodes) if n.name == target) + 1, new)
    p.edges.append(Edge(target, new.name))


def _readers(p: Program, d: dict[str, Any], default: list[str]) -> list[Node]:
    return [_existing(p, r, d["op"]) for r in (d.get("readers") or default)]


def insert(p: Program, d: dict[str, Any], allowed: set[str], where: str) -> None:
    target = _existing(p, _need(d, "target", d["op"]), d["op"]).name
    node = build_node(p, _need(d, "node", d["op"]), d["op"], allowed)
    if where == "before":
        _splice_before(p, node, target)
        _read_outputs(node, _readers(p, d, [target]))
    else:
        _splice_after(p, node, target)
        _read_outputs(node, _readers(p, d, []))


def remove(p: Program, d: dict[str, Any], _allowed: set[str]) -> None:
    name = _existing(p, _need(d, "target", "remove"), "remove").name
    if len(p.nodes) == 1:
        raise EditError("remove: cannot remove the only node")
    if any(isinstance(n, ValidateNode) and n.retry == name for n in p.nodes):
        raise EditError(f"remove: a validator retries {name!r}; remove the validator first")
    ins = [e for e in p.edges if e.dst == name and e.src != name]
    outs = [e for e in p.edges if e.src == name and e.dst != name]
    if p.entry == name:
        plain = [e for e in outs if e.when is None]
        if not plain:
            raise EditError(f"remove: {name!r} is the entry and has no unconditional successor")
        p.entry = plain[0].dst
    bridged = [Edge(a.src, b.dst, a.when or b.when) for a in ins for b in outs]
    p.edges = [e for e in p.edges if name not in (e.src, e.dst)] + bridged
    p.nodes = [n for n in p.nodes if n.name != name]


def rewire(p: Program, d: dict[str, Any], _allowed: set[str]) -> None:
    src, dst = str(_need(d, "src", "rewire")), str(_need(d, "dst", "rewire"))
    when = d.get("when") or None  # the condition's label as the program text shows it, to pick one of several
    edge = next((e for e in p.edges if e.src == src and e.dst == dst
                 and (when is None or (e.when.label() if e.when else "") == str(when))), None)
    if edge is None:
        have = ", ".join(f"{e.src}->{e.dst}" + (f" when {e.when.label()}" if e.when else "") for e in p.edges)
        raise EditError(f"rewire: no edge {src}->{dst}{f' when {when}' if when else ''} (edges: {have})")
    to = d.get("to")
    if to is None:
        p.edges.remove(edge)
    else:
        edge.dst = _existing(p, to, "rewire").name


def add_validator(p: Program, d: dict[str, Any], allowed: set[str]) -> None:
    """After `target`: a check of its outputs; on failure a revise module rewrites them, at most `max_attempts`."""
    target = _existing(p, _need(d, "target", "add_validator"), "add_validator")
    if not isinstance(target, LLMNode):
        raise EditError(f"add_validator: {target.name!r} is not an llm node")
    fn = _allowed_fn(d.get("fn"), allowed, "add_validator")
    checks = _ports(d.get("inputs") or list(target.outputs.values()), "inputs")
    attempts = int(d.get("max_attempts", 2))
    if not 1 <= attempts <= 5:
        raise EditError("add_validator: max_attempts must be 1 to 5 (a bounded retry)")
    vname = _fresh_name(p, d.get("name") or f"check_{target.name}", "add_validator")
    rname = _fresh_name(p, f"revise_{target.name}", "add_validator")
    message = f"{vname}_message"
    p.state[message] = "str"
    reviser = LLMNode(rname, {**target.inputs, **{k: v for k, v in target.outputs.items()}, "problem": message},
                      dict(target.outputs), instruction=str(d.get("instruction") or (
                          f"{target.instruction}\nA check found a problem with the output (`problem`): "
                          "revise the output so that it passes, and keep everything else.")).strip(),
                      model=target.model, format=target.format, demos=[],
                      max_visits=attempts + 1)
    validator = ValidateNode(vname, checks, {"message": message}, fn=fn, args=dict(d.get("args") or {}),
                             retry=rname, max_attempts=attempts, max_visits=attempts + 1)
    _splice_after(p, validator, target.name)
    p.nodes.insert(p.nodes.index(validator) + 1, reviser)
    p.edges.append(Edge(rname, vname))


def add_tool(p: Program, d: dict[str, Any], allowed: set[str]) -> None:
    spec = dict(_need(d, "node", "add_tool"))
    spec["kind"] = "tool"
    insert(p, {**d, "node": spec}, allowed, "before")


def add_retrieval(p: Program, d: dict[str, Any], allowed: set[str]) -> None:
    spec = dict(_need(d, "node", "add_retrieval"))
    spec.update(kind="retrieve", inputs={"query": str(_need(spec, "query", "add_retrieval"))})
    spec.pop("query")
    spec.setdefault("outputs", {"passages": f"{spec.get('name', 'retrieved')}_passages"})
    spec["types"] = {f: "list[str]" for f in _ports(spec["outputs"], "outputs").values()}
    insert(p, {**d, "node": spec}, allowed, "before")


def split(p: Program, d: dict[str, Any], _allowed: set[str]) -> None:
    """One llm module into two: the first writes an intermediate field, the second the original outputs."""
    target = _existing(p, _need(d, "target", "split"), "split")
    if not isinstance(target, LLMNode):
        raise EditError(f"split: {target.name!r} is not an llm node")
    first_name = _fresh_name(p, _need(d, "first", "split"), "split")
    field = str(_need(d, "field", "split"))
    if field in p.state:
        raise EditError(f"split: field {field!r} already exists")
    p.state[field] = "str"
    first = LLMNode(first_name, dict(target.inputs), {field: field}, instruction=str(d.get("first_instruction", "")),
                    model=target.model, format=target.format)
    target.inputs[field] = field
    if d.get("second_instruction"):
        target.instruction = str(d["second_instruction"])
    target.demos = []  # the old demos lack the new input
    _splice_before(p, first, target.name)


def add_state_field(p: Program, d: dict[str, Any], _allowed: set[str]) -> None:
    writer = _existing(p, _need(d, "writer", "add_state_field"), "add_state_field")
    field = str(_need(d, "field", "add_state_field"))
    if not isinstance(writer, LLMNode):
        raise EditError(f"add_state_field: the writer {writer.name!r} must be an llm node")
    if field in p.state:
        raise EditError(f"add_state_field: field {field!r} already exists")
    _declare(p, {field: field}, {field: d.get("type", "str")})
    writer.outputs[field] = field
    if d.get("description"):
        writer.descriptions[field] = str(d["description"])
    for r in _readers(p, {**d, "op": "add_state_field"}, []):
        r.inputs[field] = field


OPS: dict[str, Callable[[Program, dict[str, Any], set[str]], None]] = {
    "insert_before": lambda p, d, a: insert(p, d, a, "before"),
    "insert_after": lambda p, d, a: insert(p, d, a, "after"),
    "remove": remove,
    "rewire": rewire,
    "add_validator": add_validator,
    "add_tool": add_tool,
    "add_retrieval": add_retrieval,
    "split": split,
    "add_state_field": add_state_field,
}


def apply_edits(parent: Program, edits: list[dict[str, Any]], allowed_fns: set[str]) -> Program:
    """The parent with every edit applied in order, type-checked; EditError names the first problem."""
    if not isinstance(edits, list) or not edits:
        raise EditError("the reply holds no edit")
    child = parent.copy()
    for i, d in enumerate(edits):
        if not isinstance(d, dict):
            raise EditError(f"edit {i + 1} is not an object")
        op = d.get("op")
        if op not in OPS:
            raise EditError(f"edit {i + 1}: unknown op {op!r} (known: {', '.join(OPS)})")
        OPS[op](child, d, allowed_fns)
    typecheck(child)
    return child


def describe_library(tools: dict[str, str], validators: dict[str, str]) -> str:
    """The edit library as the reflection model reads it."""
    lines = [
        "Edits (JSON objects; `node` specs: {name, kind: llm|tool|code|retrieve, inputs: [fields], outputs: [fields], "
        "instruction, fn, types: {field: type}}):",
        '- {"op": "insert_before", "target": N, "node": {...}, "readers": [nodes that read its outputs; default [N]]}',
        '- {"op": "insert_after", "target": N, "node": {...}, "readers": [...]}',
        '- {"op": "remove", "target": N}',
        '- {"op": "rewire", "src": A, "dst": B, "when": label, "to": C}   (the edge A->B [with that condition] now '
        'goes to C; "to": null deletes it)',
        '- {"op": "add_validator", "target": N, "fn": F, "inputs": {param: field}, "max_attempts": 2}',
        '- {"op": "add_tool", "target": N, "node": {"name", "fn": F, "inputs": {param: field}, "outputs": [fields]}}',
        '- {"op": "add_retrieval", "target": N, "node": {"name", "query": field, "k": 5}}',
        '- {"op": "split", "target": N, "first": name, "field": new_field, "first_instruction": ..., '
        '"second_instruction": ...}',
        '- {"op": "add_state_field", "writer": N, "field": F, "type": "str", "readers": [nodes], "description": ...}',
    ]
    if tools:
        lines.append("Tools: " + "; ".join(f"{k} ({v})" for k, v in sorted(tools.items())))
    if validators:
        lines.append("Validators: " + "; ".join(f"{k} ({v})" for k, v in sorted(validators.items())))
    return "\n".join(lines)
