"""A maestro program: a typed graph of nodes over a typed state, with bounded cycles.

A program is plain data the optimizer can read, edit, hash, run and compare. It is defined in
Python with `ProgramBuilder`, or loaded from JSON or TOML; `Program.from_dict(p.to_dict()) == p`
and the content hash depends only on that dict.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError
from triforge.maestro import toml_io
from triforge.maestro.nodes import (
    CodeNode,
    Cond,
    Edge,
    LLMNode,
    Node,
    RetrieveNode,
    RouterNode,
    ToolNode,
    ValidateNode,
    edge_from_dict,
    node_from_dict,
)

FIELD_TYPES = ("str", "int", "float", "bool", "list[str]", "json")
FORMAT_VERSION = 1


class ProgramError(UserError):
    """A program that is malformed: unknown nodes or fields, bad types, a missing entry."""


@dataclass
class Program:
    name: str
    inputs: list[str]
    outputs: list[str]
    state: dict[str, str]  # field -> type, for every field any node reads or writes
    nodes: list[Node]
    edges: list[Edge] = field(default_factory=list)
    entry: str = ""
    max_steps: int = 64
    description: str = ""

    # --- lookup --------------------------------------------------------------------------------
    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def successors(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.src == name]

    # --- data ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "description": self.description,
            "entry": self.entry,
            "max_steps": self.max_steps,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "state": dict(self.state),
            "nodes": [n.to_dict() for n in self.nodes],
            "edges": [e.to_dict() for e in self.edges],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Program:
        if not isinstance(d, dict):
            raise ProgramError(f"a program is a table of keys (name, inputs, outputs, nodes, edges), not a "
                               f"{type(d).__name__}")
        for key in ("nodes", "edges"):
            items = d.get(key, [])
            if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
                raise ProgramError(f"malformed program: {key!r} is a list of tables, one per {key[:-1]}")
        if not isinstance(d.get("name", ""), str):
            raise ProgramError("malformed program: 'name' is a string")
        try:
            version = d.get("format", FORMAT_VERSION)
            if version != FORMAT_VERSION:
                raise ProgramError(f"program format {version} is not supported (this triforge reads {FORMAT_VERSION})")
            prog = cls(
                name=d["name"],
                description=d.get("description", ""),
                entry=d.get("entry", ""),
                max_steps=int(d.get("max_steps", 64)),
                inputs=list(d["inputs"]),
                outputs=list(d["outputs"]),
                state=dict(d.get("state", {})),
                nodes=[node_from_dict(n) for n in d.get("nodes", [])],
                edges=[edge_from_dict(e) for e in d.get("edges", [])],
            )
        except KeyError as e:
            raise ProgramError(f"program is missing the key {e.args[0]!r}") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise ProgramError(f"malformed program: {e}") from None
        prog.check()
        return prog

    def copy(self) -> Program:
        return copy.deepcopy(self)

    @property
    def hash(self) -> str:
        """Content hash: equal for equal programs, whatever file they came from."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def to_toml(self) -> str:
        return toml_io.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> Program:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as e:
            raise ProgramError(f"program is not valid JSON: {e.msg} at line {e.lineno}") from None

    @classmethod
    def from_toml(cls, text: str) -> Program:
        try:
            return cls.from_dict(tomllib.loads(text))
        except tomllib.TOMLDecodeError as e:
            raise ProgramError(f"program is not valid TOML: {e}") from None

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(self.to_toml() if p.suffix == ".toml" else self.to_json(), encoding="utf-8")
        return p

    @classmethod
    def load(cls, path: str | Path) -> Program:
        p = Path(path)
        if not p.is_file():
            raise ProgramError(f"program file {p} not found")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ProgramError(f"{p}: a program file is UTF-8 text (byte {e.start} cannot be read)") from None
        try:
            return cls.from_toml(text) if p.suffix == ".toml" else cls.from_json(text)
        except ProgramError as e:
            raise ProgramError(f"{p}: {e}") from None

    # --- checks --------------------------------------------------------------------------------
    def check(self) -> None:
        """Raise ProgramError with one line naming the first problem found."""
        names = [n.name for n in self.nodes]
        if not names:
            raise ProgramError(f"program {self.name!r} has no nodes")
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ProgramError(f"program {self.name!r}: duplicate node names {sorted(dup)}")
        if self.entry not in names:
            raise ProgramError(f"program {self.name!r}: entry {self.entry!r} is not a node (nodes: {names})")
        for f, t in self.state.items():
            if t not in FIELD_TYPES:
                raise ProgramError(f"state field {f!r} has unknown type {t!r} (known: {', '.join(FIELD_TYPES)})")
        written = set(self.inputs)
        for n in self.nodes:
            written |= set(n.outputs.values())
        for f in [*self.inputs, *self.outputs, *written]:
            if f not in self.state:
                raise ProgramError(f"field {f!r} is used but not declared in the program state")
        for f in self.outputs:
            if f not in written:
                raise ProgramError(f"program output {f!r} is written by no node")
        for n in self.nodes:
            for local, f in n.inputs.items():
                if f not in written:
                    raise ProgramError(f"node {n.name!r} reads {f!r} (as {local!r}), which no node writes "
                                       f"and is not a program input")
            if n.max_visits < 1:
                raise ProgramError(f"node {n.name!r}: max_visits must be at least 1")
            _check_node(n, names)
        for e in self.edges:
            for end in (e.src, e.dst):
                if end not in names:
                    raise ProgramError(f"edge {e.src} -> {e.dst}: {end!r} is not a node")
            if e.when is not None and e.when.field not in self.state:
                raise ProgramError(f"edge {e.src} -> {e.dst}: condition on unknown field {e.when.field!r}")


def _check_node(n: Node, names: list[str]) -> None:
    if isinstance(n, ToolNode | CodeNode | ValidateNode) and ":" not in n.fn:
        raise ProgramError(f"node {n.name!r}: fn must be 'module:function', got {n.fn!r}")
    if isinstance(n, RetrieveNode):
        if "query" not in n.inputs or "passages" not in n.outputs:
            raise ProgramError(f"retrieve node {n.name!r} needs input 'query' and output 'passages'")
        if n.k < 1:
            raise ProgramError(f"retrieve node {n.name!r}: k must be at least 1")
    if isinstance(n, ValidateNode) and n.retry is not None and n.retry not in names:
        raise ProgramError(f"validate node {n.name!r}: retry target {n.retry!r} is not a node")
    if isinstance(n, LLMNode):
        if not n.outputs:
            raise ProgramError(f"llm node {n.name!r} has no outputs")
        if n.format not in ("json", "markers"):
            raise ProgramError(f"llm node {n.name!r}: format must be 'json' or 'markers'")


_IMPLIED = {("retrieve", "passages"): "list[str]", ("retrieve", "titles"): "list[str]",
            ("validate", "ok"): "bool"}


def _ports(ports: list[str] | dict[str, str] | None) -> dict[str, str]:
    if ports is None:
        return {}
    return {p: p for p in ports} if isinstance(ports, list | tuple) else dict(ports)


class ProgramBuilder:
    """Build a program node by node; each node follows the previous one unless `after` says otherwise.

    >>> b = ProgramBuilder("qa", inputs=["question"], outputs=["answer"])
    >>> _ = b.llm("answer", inputs=["question"], outputs=["answer"], instruction="Answer briefly.")
    >>> b.build().entry
    'answer'
    """

    def __init__(self, name: str, *, inputs: list[str], outputs: list[str],
                 types: dict[str, str] | None = None, description: str = "", max_steps: int = 64) -> None:
        self.name, self.description, self.max_steps = name, description, max_steps
        self.inputs, self.outputs = list(inputs), list(outputs)
        self.state: dict[str, str] = {f: "str" for f in inputs}
        self.state.update(types or {})
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        self._last: str | None = None

    def field(self, name: str, type_: str) -> ProgramBuilder:
        self.state[name] = type_
        return self

    def add(self, node: Node, *, after: str | None | bool = True) -> Node:
        """Add a node; `after=True` links it from the previous node, a name from that node, None not at all."""
        src = self._last if after is True else (after or None)
        if src:
            self.edges.append(Edge(src, node.name))
        for local, f in node.outputs.items():
            self.state.setdefault(f, _IMPLIED.get((node.kind, local), "str"))
        self.nodes.append(node)
        self._last = node.name
        return node

    def edge(self, src: str, dst: str, when: Cond | None = None) -> ProgramBuilder:
        self.edges.append(Edge(src, dst, when))
        return self

    def llm(self, name: str, *, inputs: list[str] | dict[str, str], outputs: list[str] | dict[str, str],
            instruction: str = "", after: str | None | bool = True, **config: Any) -> LLMNode:
        node = LLMNode(name, _ports(inputs), _ports(outputs), instruction=instruction, **config)
        return self.add(node, after=after)  # type: ignore[return-value]

    def tool(self, name: str, fn: str, *, inputs: list[str] | dict[str, str], outputs: list[str] | dict[str, str],
             after: str | None | bool = True, **config: Any) -> ToolNode:
        return self.add(ToolNode(name, _ports(inputs), _ports(outputs), fn=fn, **config), after=after)  # type: ignore[return-value]

    def code(self, name: str, fn: str, *, inputs: list[str] | dict[str, str], outputs: list[str] | dict[str, str],
             after: str | None | bool = True, **config: Any) -> CodeNode:
        return self.add(CodeNode(name, _ports(inputs), _ports(outputs), fn=fn, **config), after=after)  # type: ignore[return-value]

    def retrieve(self, name: str, *, query: str, passages: str, titles: str | None = None, k: int = 5,
                 corpus: str = "default", after: str | None | bool = True, **config: Any) -> RetrieveNode:
        outs = {"passages": passages, **({"titles": titles} if titles else {})}
        node = RetrieveNode(name, {"query": query}, outs, corpus=corpus, k=k, **config)
        return self.add(node, after=after)  # type: ignore[return-value]

    def validate(self, name: str, fn: str, *, inputs: list[str] | dict[str, str],
                 outputs: list[str] | dict[str, str] | None = None, retry: str | None = None,
                 after: str | None | bool = True, **config: Any) -> ValidateNode:
        node = ValidateNode(name, _ports(inputs), _ports(outputs), fn=fn, retry=retry, **config)
        return self.add(node, after=after)  # type: ignore[return-value]

    def router(self, name: str, *, after: str | None | bool = True, **config: Any) -> RouterNode:
        return self.add(RouterNode(name, **config), after=after)  # type: ignore[return-value]

    def build(self) -> Program:
        if not self.nodes:
            raise ProgramError(f"program {self.name!r} has no nodes")
        prog = Program(name=self.name, description=self.description, inputs=self.inputs, outputs=self.outputs,
                       state=dict(self.state), nodes=list(self.nodes), edges=list(self.edges),
                       entry=self.nodes[0].name, max_steps=self.max_steps)
        prog.check()
        return prog
