"""Node kinds of a maestro program: plain dataclasses, one per kind, each with its config.

Every node reads named state fields through `inputs` (node-local name -> state field) and writes
through `outputs` (node-local name -> state field). Control flow lives on the program's edges.
Python callables are referenced as `"module:function"` so a program stays plain data.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

Format = Literal["json", "markers"]


@dataclass
class Node:
    name: str
    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    max_visits: int = 3  # a bound on how often this node may run in one execution (cycles are bounded)
    kind: ClassVar[str] = "node"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):
            d[f.name] = _plain(getattr(self, f.name))
        return d


@dataclass
class LLMNode(Node):
    """A predict module: named inputs and outputs, an instruction, demos and sampling config."""

    instruction: str = ""
    demos: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None  # alias; None uses the run's default model
    temperature: float | None = None
    max_tokens: int | None = None
    format: Format = "json"
    reasoning: bool = False  # ask for a `reasoning` field before the outputs
    descriptions: dict[str, str] = field(default_factory=dict)  # field name -> what it holds
    kind: ClassVar[str] = "llm"


@dataclass
class ToolNode(Node):
    """A Python function (may have side effects); called with the node-local inputs and `args`.

    A function with a parameter named `llm` is also given the node's model (an agent as a tool), and
    one with a parameter named `sample` the sample index.
    """

    fn: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    kind: ClassVar[str] = "tool"


@dataclass
class CodeNode(Node):
    """A deterministic Python transform of its inputs."""

    fn: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    kind: ClassVar[str] = "code"


@dataclass
class RetrieveNode(Node):
    """BM25 over a named corpus: input `query`, output `passages` (and optionally `titles`)."""

    corpus: str = "default"
    k: int = 5
    kind: ClassVar[str] = "retrieve"


@dataclass
class ValidateNode(Node):
    """A check `fn(**inputs) -> bool | (bool, message)`; on failure routes back to `retry`.

    Outputs it may bind: `ok` (bool) and `message` (str). After `max_attempts` failures the run goes
    on along the normal edges, with `ok` false in the state.
    """

    fn: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    retry: str | None = None
    max_attempts: int = 2
    kind: ClassVar[str] = "validate"


@dataclass
class RouterNode(Node):
    """Does nothing itself; its outgoing edges carry the conditions."""

    kind: ClassVar[str] = "router"


NODE_KINDS: dict[str, type[Node]] = {
    cls.kind: cls for cls in (LLMNode, ToolNode, CodeNode, RetrieveNode, ValidateNode, RouterNode)
}

Op = Literal["truthy", "falsy", "eq", "ne", "contains", "lt", "gt"]
_OPS = ("truthy", "falsy", "eq", "ne", "contains", "lt", "gt")


@dataclass
class Cond:
    """A condition on one state field."""

    field: str
    op: Op = "truthy"
    value: Any = None

    def holds(self, state: dict[str, Any]) -> bool:
        v = state.get(self.field)
        match self.op:
            case "truthy":
                return bool(v)
            case "falsy":
                return not v
            case "eq":
                return v == self.value
            case "ne":
                return v != self.value
            case "contains":
                return v is not None and self.value in v
            case "lt":
                return v is not None and v < self.value
            case "gt":
                return v is not None and v > self.value
        raise ValueError(f"unknown condition op {self.op!r} (known: {', '.join(_OPS)})")

    def label(self) -> str:
        if self.op in ("truthy", "falsy"):
            return self.field if self.op == "truthy" else f"not {self.field}"
        sym = {"eq": "==", "ne": "!=", "contains": "contains", "lt": "<", "gt": ">"}[self.op]
        return f"{self.field} {sym} {self.value!r}"


@dataclass
class Edge:
    """Control flow from `src` to `dst`, taken when `when` holds (or always when it is None)."""

    src: str
    dst: str
    when: Cond | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"src": self.src, "dst": self.dst}
        if self.when is not None:
            d["when"] = _plain(self.when)
        return d


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def node_from_dict(d: dict[str, Any]) -> Node:
    d = dict(d)
    kind = d.pop("kind", None)
    cls = NODE_KINDS.get(str(kind))
    if cls is None:
        raise ValueError(f"node {d.get('name')!r}: unknown kind {kind!r} (known: {', '.join(NODE_KINDS)})")
    known = {f.name for f in dataclasses.fields(cls)}
    extra = sorted(set(d) - known)
    if extra:
        raise ValueError(f"node {d.get('name')!r} ({kind}): unknown keys {extra}")
    for f in dataclasses.fields(cls):  # a table or a list where the node keeps one, not anything else
        want = f.default_factory if f.default_factory in (dict, list) else None  # type: ignore[comparison-overlap]
        if want is not None and f.name in d and not isinstance(d[f.name], want):
            noun = "a table" if want is dict else "a list"
            raise ValueError(f"node {d.get('name')!r} ({kind}): {f.name!r} is {noun}, not {d[f.name]!r}")
    return cls(**d)


def edge_from_dict(d: dict[str, Any]) -> Edge:
    when = d.get("when")
    if when is not None and not isinstance(when, Cond):
        if when.get("op", "truthy") not in _OPS:
            raise ValueError(f"edge {d.get('src')}->{d.get('dst')}: unknown op {when.get('op')!r}")
        when = Cond(**when)
    return Edge(src=d["src"], dst=d["dst"], when=when)
