"""Prompts for the reflection model and the parsing of its replies (instructions and graph edits).

The reflection model sees what the program did on failing examples (per-node inputs, outputs and
errors from the traces) and the benchmark's own feedback on each failure, never a score it did not
observe. Replies are read strictly: an instruction between markers, edits as one JSON object.
"""

from __future__ import annotations

import json
import re
from typing import Any

import json_repair

from triforge.maestro.evaluate import ExampleResult
from triforge.maestro.nodes import Node
from triforge.maestro.optimize.rollouts import trace_summary
from triforge.maestro.program import Program
from triforge.maestro.render import to_text


class ReplyError(ValueError):
    """A reflection reply that holds no usable proposal."""


def _node_steps(result: ExampleResult, node: str, limit: int = 500) -> list[dict[str, Any]]:
    return [s for s in trace_summary(result, limit) if s["node"] == node]


def instruction_prompt(program: Program, node: Node, text: str, failures: list[ExampleResult],
                       successes: list[ExampleResult]) -> str:
    parts = [
        f"You improve one module of an LLM program. The program:\n\n{to_text(program)}",
        f"The module to improve is `{node.name}` (inputs: {', '.join(node.inputs)}; outputs: "
        f"{', '.join(node.outputs)}). Its current instruction:\n```\n{text}\n```",
        "Examples where the program's final output was judged wrong, with what this module received and "
        "produced, and the evaluator's feedback:",
    ]
    for i, r in enumerate(failures, 1):
        steps = _node_steps(r, node.name) or [{"note": "this module did not run on this example"}]
        parts.append(f"### Example {i} (id {r.example_id})\nModule steps: {json.dumps(steps, ensure_ascii=False)}\n"
                     f"Feedback: {r.feedback}")
    if successes:
        parts.append(f"The program got {len(successes)} other example(s) of this batch right.")
    parts.append(f"Write a better instruction for `{node.name}` that fixes the failures and keeps what works. "
                 "State the task, the rules the feedback reveals, and the output format. Reply with the new "
                 "instruction between <instruction> and </instruction>.")
    return "\n\n".join(parts)


_INSTR = re.compile(r"<instruction>(.*?)(?:</instruction>|$)", re.S)


def parse_instruction(reply: str) -> str:
    m = _INSTR.search(reply or "")
    text = (m.group(1) if m else "").strip()
    if not text:
        fence = re.search(r"```(?:\w*\n)?(.*?)```", reply or "", re.S)
        text = fence.group(1).strip() if fence else ""
    if not text:
        raise ReplyError("the reply holds no <instruction>...</instruction> block")
    return text


def edit_prompt(program: Program, library: str, failures: list[ExampleResult], max_edits: int) -> str:
    parts = [
        "You improve the structure of an LLM program (a graph of modules over named state fields). The "
        f"program:\n\n{to_text(program)}",
        library,
        "Runs that failed, step by step (node, inputs, outputs, error), with the evaluator's feedback:",
    ]
    for i, r in enumerate(failures, 1):
        parts.append(f"### Example {i} (id {r.example_id})\nSteps: "
                     f"{json.dumps(trace_summary(r, 300), ensure_ascii=False)}\n"
                     f"Run error: {r.error or 'none'}\nFeedback: {r.feedback}")
    parts.append(f"Propose at most {max_edits} edit(s) that fix the cause of these failures. Reply with one JSON "
                 'object: {"rationale": "...", "edits": [ {...}, ... ]}.')
    return "\n\n".join(parts)


def parse_edits(reply: str) -> tuple[list[dict[str, Any]], str]:
    """The edits and the rationale from a reply; ReplyError when there is no JSON object with edits."""
    text = reply or ""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ReplyError("the reply holds no JSON object")
    try:
        obj = json.loads(text[start:end + 1])
    except json.JSONDecodeError:
        try:
            obj = json_repair.loads(text[start:end + 1])
        except Exception:  # json_repair raises assorted errors on hopeless input
            raise ReplyError("the reply's JSON cannot be read") from None
    if not isinstance(obj, dict):
        raise ReplyError("the reply's JSON is not an object")
    edits = obj.get("edits")
    if edits is None and "op" in obj:
        edits = [obj]
    if not isinstance(edits, list) or not edits:
        raise ReplyError("the reply's JSON has no non-empty 'edits' list")
    return edits, str(obj.get("rationale", ""))
