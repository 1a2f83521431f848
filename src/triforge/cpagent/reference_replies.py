"""Scripted replies for exercising cpagent against the fake server (fixtures, never results).

`reference_submitter(problems)` plays a model that runs one cell, then submits the problem's own
reference program: it drives the whole machinery (kernel, fresh-run check, strict grading) with
known-good submissions, so a failure points at the harness, not at the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def reference_submitter(problems: Iterable[Any], *, cells: int = 1) -> Callable[[dict[str, Any]], dict[str, Any]]:
    by_description = [(p.description.strip()[:300], p) for p in problems]

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
        problem = next((p for d, p in by_description if d and d in user), None)
        if problem is None:
            return {"content": "I do not recognise this problem."}
        done = sum(m["role"] == "tool" for m in body["messages"])
        if done < cells:
            return {"content": "Let me look at the data first.",
                    "tool_calls": [{"name": "python_exec", "arguments": {"code": f"print('cell {done + 1}')"}}]}
        return {"content": "Submitting.",
                "tool_calls": [{"name": "submit", "arguments": {"code": problem.reference_source}}]}

    return reply
