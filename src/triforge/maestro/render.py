"""A program as a Mermaid flowchart and as plain text."""

from __future__ import annotations

import re

from triforge.maestro.nodes import LLMNode, Node, RetrieveNode, ToolNode, ValidateNode
from triforge.maestro.program import Program

_SHAPES = {
    "llm": ("[", "]"),
    "tool": ("[[", "]]"),
    "code": ("[/", "/]"),
    "retrieve": ("[(", ")]"),
    "validate": ("{{", "}}"),
    "router": ("{", "}"),
}


def _id(name: str) -> str:
    return "n_" + re.sub(r"\W", "_", name)


def _quote(text: str) -> str:
    return '"' + text.replace('"', "#quot;") + '"'


def _ports(node: Node) -> str:
    ins = ", ".join(node.inputs.values()) or "-"
    outs = ", ".join(node.outputs.values()) or "-"
    return f"{ins} -> {outs}"


def _summary(node: Node) -> str:
    if isinstance(node, LLMNode):
        bits = [f"model={node.model or 'default'}"]
        if node.temperature is not None:
            bits.append(f"T={node.temperature:g}")
        if node.max_tokens:
            bits.append(f"max_tokens={node.max_tokens}")
        if node.demos:
            bits.append(f"{len(node.demos)} demos")
        if node.reasoning:
            bits.append("reasoning")
        bits.append(node.format)
        return " ".join(bits)
    if isinstance(node, RetrieveNode):
        return f"corpus={node.corpus} k={node.k}"
    if isinstance(node, ValidateNode):
        retry = f" retry->{node.retry} x{node.max_attempts}" if node.retry else ""
        return f"fn={node.fn}{retry}"
    if isinstance(node, ToolNode) or hasattr(node, "fn"):
        return f"fn={getattr(node, 'fn', '')}"
    return ""


def to_mermaid(program: Program) -> str:
    lines = ["flowchart TD", f"  start((start)) --> {_id(program.entry)}"]
    for n in program.nodes:
        left, right = _SHAPES[n.kind]
        lines.append(f"  {_id(n.name)}{left}{_quote(f'{n.name} ({n.kind})<br/>{_ports(n)}')}{right}")
    for e in program.edges:
        label = f"|{_quote(e.when.label())}|" if e.when else ""
        lines.append(f"  {_id(e.src)} -->{label} {_id(e.dst)}")
    for n in program.nodes:
        if isinstance(n, ValidateNode) and n.retry:
            lines.append(f"  {_id(n.name)} -.->|{_quote('fail')}| {_id(n.retry)}")
    enders = [n.name for n in program.nodes if not any(e.src == n.name for e in program.edges)]
    for name in enders:
        lines.append(f"  {_id(name)} --> stop((end))")
    return "\n".join(lines) + "\n"


def to_text(program: Program) -> str:
    lines = [f"program {program.name}  hash {program.hash}",
             f"  inputs: {', '.join(program.inputs)}   outputs: {', '.join(program.outputs)}",
             f"  entry: {program.entry}   max_steps: {program.max_steps}"]
    if program.description:
        lines.append(f"  {program.description}")
    lines.append("nodes:")
    for n in program.nodes:
        lines.append(f"  {n.name:<18} {n.kind:<9} {_ports(n)}   {_summary(n)}".rstrip())
        if isinstance(n, LLMNode) and n.instruction:
            first = n.instruction.strip().splitlines()[0]
            lines.append(f"  {'':<18} {'':<9} instruction: {first[:90]}{'...' if len(first) > 90 else ''}")
    lines.append("edges:")
    for e in program.edges:
        cond = f"  when {e.when.label()}" if e.when else ""
        lines.append(f"  {e.src} -> {e.dst}{cond}")
    lines.append("state:")
    lines.append("  " + ", ".join(f"{f}: {t}" for f, t in program.state.items()))
    return "\n".join(lines) + "\n"
