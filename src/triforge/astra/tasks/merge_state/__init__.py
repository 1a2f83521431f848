"""merge_state: merge two attention partials by base-2 LSE (FlashInfer's convention); lse layout
[num_tokens, num_heads]; both parts empty (-inf) gives out 0 and lse -inf."""

from __future__ import annotations

from triforge.astra.tasks._merge import make_task


def _flashinfer(inputs) -> None:
    import flashinfer

    v, s = flashinfer.cascade.merge_state(inputs["v_a"], inputs["s_a"], inputs["v_b"], inputs["s_b"])
    inputs["out"].copy_(v)
    inputs["out_lse"].copy_(s)


TASK = make_task("merge_state", base2=True, heads_major=False, plus_inf_is_empty=False, description=__doc__ or "",
                 flashinfer=_flashinfer)
