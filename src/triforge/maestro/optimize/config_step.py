"""The config step: the graph stays, one module's config changes (instruction, demos or model), or two
lineages that changed different modules are merged.

Moves, in a fixed rotation: a reflective instruction rewrite (the reflection model reads the failing
traces of this module and the benchmark's feedback), demos taken from successful traces, another model
from the configured list (kept when the score holds at a lower cost, or rises), and a merge.
"""

from __future__ import annotations

from typing import Any

from triforge.maestro.benchmarks.base import Example
from triforge.maestro.evaluate import ExampleResult
from triforge.maestro.nodes import LLMNode, Node, ToolNode
from triforge.maestro.optimize.pareto import Candidate
from triforge.maestro.optimize.proposals import Proposal, program_diff
from triforge.maestro.optimize.reflect import ReplyError, instruction_prompt, parse_instruction
from triforge.maestro.optimize.state import SearchState
from triforge.maestro.program import Program

MOVES = ("instruction", "instruction", "demos", "model", "merge")


def llm_nodes(p: Program) -> list[LLMNode]:
    return [n for n in p.nodes if isinstance(n, LLMNode)]


def prompt_key(node: Node) -> str | None:
    """Where a module keeps the text the instruction move rewrites: an llm node's instruction, or the string
    argument of a tool node whose name holds "prompt" (an agent run as a tool, like CP-Bench's cpagent)."""
    if isinstance(node, LLMNode):
        return "instruction"
    if isinstance(node, ToolNode):
        return next((k for k, v in sorted(node.args.items()) if "prompt" in k and isinstance(v, str)), None)
    return None


def text_modules(p: Program) -> list[Node]:
    return [n for n in p.nodes if prompt_key(n) is not None]


def get_text(node: Node) -> str:
    key = prompt_key(node)
    return node.instruction if isinstance(node, LLMNode) else str(node.args[key])  # type: ignore[attr-defined]


def set_text(node: Node, text: str) -> None:
    if isinstance(node, LLMNode):
        node.instruction = text
    else:
        node.args[prompt_key(node)] = text  # type: ignore[attr-defined,index]


def config_step(st: SearchState, n: int) -> Proposal | None:
    """One config proposal; None when there is nothing to propose (no module with a text to rewrite)."""
    move = MOVES[n % len(MOVES)]
    if move == "merge":
        prop = merge_step(st)
        if prop is not None:
            return prop
        move = "instruction"
    if move == "model" and len(st.settings.models) < 2:
        move = "instruction"
    parent = st.pool.select(st.rng)
    modules = text_modules(parent.program)
    if not modules:
        return None
    module = modules[n % len(modules)]
    if not isinstance(module, LLMNode):
        move = "instruction"  # a tool's prompt has no demos or model of its own here
    mb = st.minibatch()
    prop = Proposal(st.proposals, "config", move, parent.id, module=module.name, minibatch_ids=[e.id for e in mb])
    st.current = prop
    parent_results = st.rollouts.run(parent.program, mb, "train")
    failures = [r for r in parent_results if r.score < 1.0]
    prop.motivating_ids = [r.example_id for r in failures]
    if not failures and move != "model":
        prop.verdict = "skipped: the parent is perfect on this minibatch"
        return prop
    left = st.ledger.left("rollouts")
    if left is not None and left < len(mb):
        prop.verdict = "skipped: too few rollouts left for the paired comparison"
        return prop
    child = parent.program.copy()
    node = child.node(module.name)
    if move == "instruction":
        successes = [r for r in parent_results if r.score >= 1.0]
        try:
            set_text(node, parse_instruction(st.reflect(instruction_prompt(parent.program, module, get_text(module),
                                                                            failures, successes))))
        except ReplyError as e:
            prop.verdict = f"rejected: {e}"
            return prop
    elif move == "demos" and isinstance(module, LLMNode) and isinstance(node, LLMNode):
        demos = demos_from(st, parent, module, st.train)
        if not demos or demos == node.demos:
            prop.verdict = "skipped: no new demos from successful traces"
            return prop
        node.demos = demos
    elif isinstance(node, LLMNode):
        choices = [m for m in st.settings.models if m != (node.model or st.settings.models[0])]
        node.model = choices[st.rng.randrange(len(choices))]
    prop.diff = program_diff(parent.program, child)
    st.judge(prop, parent, child, mb, parent_results)
    return prop


def demos_from(st: SearchState, parent: Candidate, module: LLMNode, examples: list[Example]) -> list[dict[str, Any]]:
    """The module's inputs and outputs on examples the parent got right (already run; nothing new is spent)."""
    demos: list[dict[str, Any]] = []
    for ex in examples:
        r: ExampleResult | None = st.rollouts.known(parent.program, ex.id)
        if r is None or r.score < 1.0:
            continue
        step = next((t for t in r.trace if t["node"] == module.name and not t.get("error")), None)
        if step is None:
            continue
        demos.append({**step["inputs"], **step["outputs"]})
        if len(demos) >= st.settings.max_demos:
            break
    return demos


def _structure(p: Program) -> str:
    q = p.copy()
    for n in llm_nodes(q):
        n.instruction, n.demos, n.model = "", [], None
    return q.hash


def merge_step(st: SearchState) -> Proposal | None:
    """Two front candidates of one graph whose lineages changed different modules: take each one's changes."""
    front = sorted(st.pool.front())
    for i in front:
        for j in front:
            if j <= i:
                continue
            a, b = st.pool.get(i), st.pool.get(j)
            if _structure(a.program) != _structure(b.program):
                continue
            common = st.pool.ancestors(i) & st.pool.ancestors(j)
            if not common or i in common or j in common:
                continue
            base = st.pool.get(max(common)).program
            if _structure(base) != _structure(a.program):
                continue
            da, db = _changed(base, a.program), _changed(base, b.program)
            if not da or not db or da & db:
                continue
            child = a.program.copy()
            for name in db:
                child.nodes[[n.name for n in child.nodes].index(name)] = b.program.node(name)
            if st.pool.by_hash(child.hash) is not None:
                continue
            mb = st.minibatch()
            prop = Proposal(st.proposals, "config", "merge", a.id, module=",".join(sorted(db)),
                            minibatch_ids=[e.id for e in mb], rationale=f"merge of candidates {a.id} and {b.id}")
            st.current = prop
            prop.diff = program_diff(a.program, child)
            left = st.ledger.left("rollouts")
            if left is not None and left < 2 * len(mb):
                prop.verdict = "skipped: too few rollouts left for the paired comparison"
                return prop
            parent_results = st.rollouts.run(a.program, mb, "train")
            if st.judge(prop, a, child, mb, parent_results) is not None:
                st.pool.get(prop.child_id).parents.append(b.id)  # type: ignore[arg-type]
            return prop
    return None


def _changed(base: Program, p: Program) -> set[str]:
    return {n.name for n in llm_nodes(p) if n.to_dict() != base.node(n.name).to_dict()}
