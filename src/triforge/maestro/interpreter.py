"""Runs a program on one example: walks the graph, records every node, never raises for the example.

A failure inside the program (a reply that cannot be parsed, a node function that raises, a cycle
bound reached, an endpoint that gives up) ends that run with `error` set; only a spent budget and a
replay-cache miss stop the caller, since they concern the whole run and not this example.
"""

from __future__ import annotations

import importlib
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from triforge.core import context
from triforge.core.cache import CacheMiss
from triforge.core.errors import BudgetExceeded, EndpointError
from triforge.core.llm import LLM
from triforge.maestro.nodes import CodeNode, LLMNode, Node, RetrieveNode, RouterNode, ToolNode, ValidateNode
from triforge.maestro.predict import LLMCall, ParseError, predict
from triforge.maestro.program import Program


class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[tuple[str, str]]:
        """The best `k` (title, text) pairs for a query, best first."""
        ...


Models = LLM | dict[str | None, LLM] | Callable[[str | None], LLM]


class NodeError(Exception):
    """A node that cannot run: a missing field, a function that fails, a value of the wrong type."""


class LoopLimit(Exception):
    """A node ran more often than its `max_visits`, or the run took more than `max_steps`."""


@dataclass
class NodeTrace:
    node: str
    kind: str
    step: int
    inputs: dict[str, Any]
    outputs: dict[str, Any] = field(default_factory=dict)
    llm_calls: list[LLMCall] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "kind": self.kind, "step": self.step, "inputs": self.inputs,
                "outputs": self.outputs, "llm_calls": [c.to_dict() for c in self.llm_calls],
                "meta": self.meta, "error": self.error, "duration_s": round(self.duration_s, 6)}


@dataclass
class ProgramRun:
    outputs: dict[str, Any]
    state: dict[str, Any]
    trace: list[NodeTrace]
    error: str | None = None
    error_kind: str | None = None  # parse | node | loop | endpoint | input

    @property
    def ok(self) -> bool:
        return self.error is None

    def node_traces(self, kind: str | None = None) -> list[NodeTrace]:
        return [t for t in self.trace if kind is None or t.kind == kind]


@lru_cache(maxsize=512)
def resolve_fn(ref: str) -> Callable[..., Any]:
    """Import `module:function` (dotted attributes allowed after the colon)."""
    module, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise NodeError(f"cannot import {ref!r}: {e}") from None
    if not callable(obj):
        raise NodeError(f"{ref!r} is not callable")
    return obj


@lru_cache(maxsize=512)
def _parameters(fn: Callable[..., Any]) -> frozenset[str]:
    return frozenset(inspect.signature(fn).parameters)


def model_for(models: Models, alias: str | None) -> LLM:
    if isinstance(models, dict):
        if alias in models:
            return models[alias]
        if alias is not None and None in models:
            raise NodeError(f"model alias {alias!r} is not available to this run (have: "
                            f"{', '.join(str(k) for k in models if k)})")
        return models[None]
    if callable(models) and not hasattr(models, "complete"):
        return models(alias)
    return models  # type: ignore[return-value]


_PY_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (float, int), "bool": (bool,)}


def _check_type(value: Any, type_: str, where: str) -> None:
    ok = True
    if type_ == "list[str]":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif type_ in _PY_TYPES:
        ok = isinstance(value, _PY_TYPES[type_]) and not (type_ != "bool" and isinstance(value, bool))
    if not ok:
        raise NodeError(f"{where}: expected {type_}, got {type(value).__name__} {str(value)[:60]!r}")


def _as_outputs(node: Node, ret: Any) -> dict[str, Any]:
    if isinstance(ret, dict) and set(node.outputs) <= set(ret):
        return {k: ret[k] for k in node.outputs}
    if len(node.outputs) == 1:
        return {next(iter(node.outputs)): ret}
    if not node.outputs:
        return {}
    raise NodeError(f"{node.fn} returned {type(ret).__name__}; expected a dict with keys {list(node.outputs)}")  # type: ignore[attr-defined]


class Interpreter:
    """Interprets one program graph (runs its nodes in order); holds what every example shares (models, retrievers, field types)."""

    def __init__(self, program: Program, models: Models, retrievers: dict[str, Retriever] | None = None) -> None:
        self.program = program
        self.models = models
        self.retrievers = retrievers or {}
        self._nodes = {n.name: n for n in program.nodes}
        self._edges = {n.name: program.successors(n.name) for n in program.nodes}
        self._types = {n.name: {local: program.state[f] for local, f in {**n.inputs, **n.outputs}.items()}
                       for n in program.nodes}

    def run(self, inputs: dict[str, Any], *, sample: int = 0) -> ProgramRun:
        prog = self.program
        state: dict[str, Any] = {}
        trace: list[NodeTrace] = []
        missing = [f for f in prog.inputs if f not in inputs]
        if missing:
            return ProgramRun({}, state, trace, f"example lacks program input(s) {missing}", "input")
        for f in prog.inputs:
            state[f] = inputs[f]
        visits: dict[str, int] = {}
        failures: dict[str, int] = {}
        current: str | None = prog.entry
        step = 0
        error = kind = None
        tracer = context.tracer()
        while current is not None:
            step += 1
            node = self._nodes[current]
            visits[current] = visits.get(current, 0) + 1
            rec = NodeTrace(current, node.kind, step, {})
            t0 = time.perf_counter()
            try:
                if step > prog.max_steps:
                    raise LoopLimit(f"the run took more than max_steps={prog.max_steps} steps")
                if visits[current] > node.max_visits:
                    raise LoopLimit(f"node {current!r} would run more than its max_visits={node.max_visits}")
                rec.inputs = self._read(node, state)
                if tracer is None:
                    nxt = self._step(node, rec, state, failures, sample)
                else:
                    with tracer.span(f"node {current}", "chain", **{"triforge.node.kind": node.kind}):
                        nxt = self._step(node, rec, state, failures, sample)
            except (BudgetExceeded, CacheMiss):
                raise
            except Exception as e:
                kind = _error_kind(e)
                if getattr(e, "llm_call", None) is not None:
                    rec.llm_calls.append(e.llm_call)  # type: ignore[attr-defined]
                rec.error = error = f"{current}: {_describe(e)}"
                nxt = None
            rec.duration_s = time.perf_counter() - t0
            trace.append(rec)
            current = nxt
        outputs = {f: state[f] for f in prog.outputs if f in state}
        if error is None and len(outputs) < len(prog.outputs):
            missing = [f for f in prog.outputs if f not in state]
            error, kind = f"the run ended without writing output(s) {missing}", "node"
        return ProgramRun(outputs, state, trace, error, kind)

    def _read(self, node: Node, state: dict[str, Any]) -> dict[str, Any]:
        values = {}
        for local, f in node.inputs.items():
            if f not in state:
                raise NodeError(f"reads {f!r}, which no node has written on this path")
            values[local] = state[f]
        return values

    def _step(self, node: Node, rec: NodeTrace, state: dict[str, Any], failures: dict[str, int],
              sample: int) -> str | None:
        types = self._types[node.name]
        if isinstance(node, LLMNode):
            out, call = predict(node, rec.inputs, model_for(self.models, node.model), types, sample=sample)
            rec.llm_calls.append(call)
        elif isinstance(node, RetrieveNode):
            out = self._retrieve(node, rec)
        elif isinstance(node, ValidateNode):
            out = self._validate(node, rec)
        elif isinstance(node, ToolNode | CodeNode):
            fn = resolve_fn(node.fn)
            extra: dict[str, Any] = {}
            if isinstance(node, ToolNode):
                wants = _parameters(fn)
                if "llm" in wants:
                    extra["llm"] = model_for(self.models, node.model)
                if "sample" in wants:
                    extra["sample"] = sample
            try:
                ret = fn(**rec.inputs, **node.args, **extra)
            except (NodeError, BudgetExceeded, CacheMiss, EndpointError):
                raise  # stops and endpoint failures keep their kind: they are not the node's own failure
            except Exception as e:
                raise NodeError(f"{node.fn} raised {type(e).__name__}: {e}") from e
            out = _as_outputs(node, ret)
            for local, v in out.items():
                _check_type(v, types[local], f"output {local!r} of {node.fn}")
        elif isinstance(node, RouterNode):
            out = {}
        else:  # pragma: no cover - every kind is handled above
            raise NodeError(f"unknown node kind {node.kind}")
        rec.outputs = out
        for local, f in node.outputs.items():
            if local in out:
                state[f] = out[local]
        if isinstance(node, ValidateNode) and not out["ok"] and node.retry is not None:
            failures[node.name] = failures.get(node.name, 0) + 1
            if failures[node.name] < node.max_attempts:
                rec.meta["route"] = f"retry {node.retry} (failure {failures[node.name]} of {node.max_attempts})"
                return node.retry
        for e in self._edges[node.name]:
            if e.when is None or e.when.holds(state):
                return e.dst
        return None

    def _retrieve(self, node: RetrieveNode, rec: NodeTrace) -> dict[str, Any]:
        retriever = self.retrievers.get(node.corpus)
        if retriever is None:
            raise NodeError(f"no retriever for corpus {node.corpus!r} (have: {', '.join(self.retrievers) or 'none'})")
        hits = retriever.search(str(rec.inputs["query"]), node.k)
        titles = [t for t, _ in hits]
        rec.meta["titles"] = titles
        return {"passages": [f"{t} | {x}" for t, x in hits], "titles": titles}

    def _validate(self, node: ValidateNode, rec: NodeTrace) -> dict[str, Any]:
        try:
            ret = resolve_fn(node.fn)(**rec.inputs, **node.args)
        except NodeError:
            raise
        except Exception as e:
            raise NodeError(f"{node.fn} raised {type(e).__name__}: {e}") from e
        if isinstance(ret, dict):
            ok, message = bool(ret.get("ok")), str(ret.get("message", ""))
        elif isinstance(ret, tuple):
            ok, message = bool(ret[0]), str(ret[1]) if len(ret) > 1 else ""
        else:
            ok, message = bool(ret), ""
        return {"ok": ok, "message": message}


def _error_kind(e: Exception) -> str:
    if isinstance(e, ParseError):
        return "parse"
    if isinstance(e, LoopLimit):
        return "loop"
    if isinstance(e, EndpointError):
        return "endpoint"
    return "node"


def _describe(e: Exception) -> str:
    if isinstance(e, ParseError | NodeError | LoopLimit | EndpointError):
        return str(e)
    return f"{type(e).__name__}: {e}"


def run_program(program: Program, inputs: dict[str, Any], models: Models, *,
                retrievers: dict[str, Retriever] | None = None, sample: int = 0) -> ProgramRun:
    """Run `program` once on `inputs` (a convenience around `Interpreter`)."""
    return Interpreter(program, models, retrievers).run(inputs, sample=sample)
