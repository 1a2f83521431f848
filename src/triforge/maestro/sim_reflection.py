"""A scripted stand-in for the reflection model on the simulated bed (`sim_bed`): it reads the prompt
maestro sends (the program as text, the edit library, failing steps and the benchmark's feedback) and
answers by fixed rules. It exercises the search machinery; it is not a model and never a result.

Graph prompts, first rule whose symptom appears in a failure:
  "context overflow"            -> rewire the back edge of the loop to the module writing the output
  a router on the failing path  -> rewire the router's edge taken to its other branch
  "arithmetic is wrong"         -> add_tool: the library's calculator before the answering module
  "uppercase"                   -> add_validator: the library's uppercase check after it
  "never saw the requested unit"-> add_state_field `unit`, written by the first module, read by it
  "never retrieved"             -> insert_before the module writing `query`: an entity extraction module
Every `invalid_every`-th graph reply names a node that does not exist (to exercise rejection); a
prompt matching no rule gets prose without JSON. Config prompts: when the feedback says "extra words",
the instruction gains "Reply with only the short answer."; otherwise "Double-check the answer."
(with `vary`, an attempt number is appended, so no two instructions are the same).
"""

from __future__ import annotations

import json
import re
from typing import Any

from triforge.core.config import ModelConfig
from triforge.core.llm import Completion, Usage

_NODE = re.compile(r"^  (\w+) +(llm|tool|code|retrieve|validate|router) +(.*?) -> (\S.*?)(?: {3}|$)", re.M)
_EDGE = re.compile(r"^  (\w+) -> (\w+)(?:  when (.*))?$", re.M)


def _program(prompt: str) -> tuple[dict[str, tuple[str, list[str], list[str]]], list[tuple[str, str, str]], str]:
    nodes_part = prompt.split("\nnodes:\n", 1)[1].split("\nedges:\n", 1)
    nodes = {m.group(1): (m.group(2), [x.strip() for x in m.group(3).split(",") if x.strip() not in ("", "-")],
                          [x.strip() for x in m.group(4).split(",") if x.strip() not in ("", "-")])
             for m in _NODE.finditer(nodes_part[0])}
    edges = [(m.group(1), m.group(2), m.group(3) or "") for m in _EDGE.finditer(nodes_part[1].split("\nstate:", 1)[0])]
    output = re.search(r"outputs: (\w+)", prompt).group(1)  # type: ignore[union-attr]
    return nodes, edges, output


def _failures(prompt: str) -> list[tuple[list[dict[str, Any]], str]]:
    out = []
    for block in prompt.split("### Example")[1:]:
        steps = re.search(r"Steps: (\[.*?\])\n", block)
        feedback = block.split("Feedback: ", 1)[1] if "Feedback: " in block else ""
        out.append((json.loads(steps.group(1)) if steps else [], feedback))
    return out


def _library_fn(prompt: str, word: str) -> str | None:
    m = re.search(r"([\w.]+:\w*" + word + r"\w*) \(", prompt)
    return m.group(1) if m else None


def _holds(label: str, written: dict[str, Any]) -> bool:
    m = re.match(r"(\w+) == '(.*)'$", label)
    return bool(m) and str(written.get(m.group(1))) == m.group(2)


def propose_edits(prompt: str) -> dict[str, Any] | None:
    nodes, edges, output = _program(prompt)
    writer = next((n for n, (k, _, outs) in nodes.items() if k == "llm" and output in outs), None)
    for steps, feedback in _failures(prompt):
        order = [s["node"] for s in steps]
        if "context overflow" in feedback or any("context overflow" in str(s.get("error", "")) for s in steps):
            for src, dst, _ in edges:
                if src in order and dst in order and order.index(dst) < order.index(src) and writer:
                    return {"rationale": "the loop grows the context until it overflows; leave it after one pass",
                            "edits": [{"op": "rewire", "src": src, "dst": dst, "to": writer}]}
        routers = [n for n in order if nodes.get(n, ("",))[0] == "router"]
        if routers:
            r = routers[0]
            taken = order[order.index(r) + 1] if order.index(r) + 1 < len(order) else None
            written = {k: v for s in steps[: order.index(r)] for k, v in (s.get("outputs") or {}).items()}
            label = next((w for s, d, w in edges if s == r and d == taken and _holds(w, written)), "")
            others = [n for n, (k, _, outs) in nodes.items() if k == "llm" and output in outs and n != taken]
            if taken and others:
                return {"rationale": f"examples routed to {taken} fail; route them to {others[0]}",
                        "edits": [{"op": "rewire", "src": r, "dst": taken, "when": label, "to": others[0]}]}
        if "arithmetic is wrong" in feedback and writer and (fn := _library_fn(prompt, "calculator")):
            return {"rationale": "the model's multiplication is wrong; give it a calculator",
                    "edits": [{"op": "add_tool", "target": writer, "node": {
                        "name": "calculator", "fn": fn, "inputs": {"text": "question"}, "outputs": ["result"]}}]}
        if "uppercase" in feedback and writer and (fn := _library_fn(prompt, "uppercase")):
            return {"rationale": "the format rule is forgotten; check it and retry",
                    "edits": [{"op": "add_validator", "target": writer, "fn": fn, "inputs": {"answer": output},
                               "max_attempts": 2}]}
        if "never saw the requested unit" in feedback and writer:
            first = next((n for n, (k, ins, _) in nodes.items() if k == "llm" and "question" in ins and n != writer), None)
            if first:
                return {"rationale": "carry the requested unit to the answering module",
                        "edits": [{"op": "add_state_field", "writer": first, "field": "unit", "readers": [writer]}]}
        if "never retrieved" in feedback:
            qnode = next((n for n, (k, _, outs) in nodes.items() if k == "llm" and "query" in outs), None)
            if qnode:
                return {"rationale": "the second query repeats the question; extract the bridge entity first",
                        "edits": [{"op": "insert_before", "target": qnode, "node": {
                            "name": "extract_entity", "kind": "llm", "inputs": nodes[qnode][1], "outputs": ["entity"],
                            "instruction": "Name the entity the next search must look up."}}]}
    return None


class SimReflection:
    """The scripted reflection model (an in-process LLM); `calls` counts what it was asked."""

    def __init__(self, invalid_every: int = 3, alias: str = "sim-reflect", vary: bool = False) -> None:
        self.alias, self.invalid_every, self.vary = alias, invalid_every, vary
        self.config = ModelConfig(model="sim-reflect", base_url="sim://")
        self.calls = 0
        self.graph_calls = 0

    def complete(self, messages: list[dict[str, Any]], **_: Any) -> Completion:
        self.calls += 1
        prompt = str(messages[-1]["content"])
        if prompt.startswith("You improve the structure"):
            self.graph_calls += 1
            if self.invalid_every and self.graph_calls % self.invalid_every == 0:
                reply = json.dumps({"rationale": "a typo", "edits": [{"op": "remove", "target": "answr"}]})
            else:
                prop = propose_edits(prompt)
                reply = json.dumps(prop) if prop else "No structural change seems needed."
        else:
            module = re.search(r"The module to improve is `(\w+)`", prompt)
            current = re.search(r"Its current instruction:\n```\n(.*?)\n```", prompt, re.S)
            text = current.group(1) if current else ""
            extra = ("Reply with only the short answer." if "extra words" in prompt else "Double-check the answer.")
            if self.vary:  # a new instruction every time, so every config proposal costs real rollouts
                extra += f" (attempt {self.calls})"
            reply = f"<instruction>{text} {extra}</instruction>" if module else "?"
        return Completion(content=reply, usage=Usage(len(prompt) // 4, len(reply) // 4), model="sim-reflect")
