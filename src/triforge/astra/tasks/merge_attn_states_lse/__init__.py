"""merge_attn_states_lse: merge two attention partials by natural-log LSE; lse layout [num_heads, num_tokens]
(heads-major); an LSE of +inf counts as -inf (an empty part); both empty gives out 0 and lse -inf."""

from __future__ import annotations

from triforge.astra.tasks._merge import make_task

TASK = make_task("merge_attn_states_lse", base2=False, heads_major=True, plus_inf_is_empty=True, description=__doc__ or "")
