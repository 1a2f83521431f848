"""The graph step: the reflection model reads failing traces and proposes typed edits; they are applied
to a copy of the parent (unchanged modules keep their config), type-checked, held to the trust region,
and judged like any proposal. A reply that is not a valid edit is rejected with its reason logged; its
call stays counted.
"""

from __future__ import annotations

from triforge.maestro.optimize.edits import apply_edits, describe_library
from triforge.maestro.optimize.proposals import Proposal, program_diff
from triforge.maestro.optimize.reflect import ReplyError, edit_prompt, parse_edits
from triforge.maestro.optimize.state import SearchState
from triforge.maestro.optimize.typecheck import EditError, graph_distance


def graph_step(st: SearchState) -> Proposal:
    s = st.settings
    parent = st.pool.select(st.rng)
    mb = st.minibatch()
    prop = Proposal(st.proposals, "graph", "edit", parent.id, minibatch_ids=[e.id for e in mb])
    st.current = prop
    parent_results = st.rollouts.run(parent.program, mb, "train")
    failures = [r for r in parent_results if r.score < 1.0]
    prop.motivating_ids = [r.example_id for r in failures]
    if not failures:
        prop.verdict = "skipped: the parent is perfect on this minibatch"
        return prop
    left = st.ledger.left("rollouts")
    if left is not None and left < len(mb):
        prop.verdict = "skipped: too few rollouts left for the paired comparison"
        return prop
    library = describe_library(s.tools, s.validators)
    reply = st.reflect(edit_prompt(parent.program, library, failures, s.max_edits))
    try:
        edits, prop.rationale = parse_edits(reply)
        prop.edits = edits
        prop.module = ",".join(str(d.get("op")) for d in edits if isinstance(d, dict))  # what the edits do, in brief
        if len(edits) > s.max_edits:
            raise EditError(f"{len(edits)} edits in one proposal; at most {s.max_edits}")
        child = apply_edits(parent.program, edits, set(s.tools) | set(s.validators))
    except (ReplyError, EditError) as e:
        prop.verdict = f"rejected: invalid edit: {e}"
        return prop
    step_d, total_d = graph_distance(parent.program, child), graph_distance(st.seed_program, child)
    if step_d > s.max_step_distance or total_d > s.max_total_distance:
        prop.verdict = (f"rejected: outside the trust region (distance {step_d} from the parent, max "
                        f"{s.max_step_distance}; {total_d} from the seed, max {s.max_total_distance})")
        return prop
    prop.diff = program_diff(parent.program, child)
    st.judge(prop, parent, child, mb, parent_results)
    return prop
