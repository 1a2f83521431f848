"""merge_attn_states_lse and merge_state: planted faults and mutation rewrites."""

from __future__ import annotations

from triforge.astra.corpus.planted.variants import Variant, mutate, relaunch

LOOP = "for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {"
W = "    wa = ea / total;\n    wb = eb / total;"
LSE_STORE = "if (threadIdx.x == 0) out_lse[lse_idx]"


def _common(t: str, exp: str, log: str) -> list[Variant]:
    f = "fault"
    return [
        mutate(t, "no-max-subtraction", f, (f"{exp}(pa - m)", f"{exp}(pa)"), (f"{exp}(pb - m)", f"{exp}(pb)"),
               (f"{log}(total) + m", f"{log}(total)")),
        mutate(t, "weights-swapped", f, (W, "    wa = eb / total;\n    wb = ea / total;")),
        mutate(t, "weights-not-normalized", f, (W, "    wa = ea;\n    wb = eb;")),
        mutate(t, "lse-never-written", f, (LSE_STORE, "if (threadIdx.x == 0 && token > 0) out_lse[lse_idx]")),
        mutate(t, "tail-off-by-one", f, (LOOP, LOOP.replace("i < head_dim", "i < head_dim - 1"))),
        mutate(t, "both-empty-not-handled", f, ("if (m != neg_inf()) {", "if (true) {")),
        mutate(t, "hard-coded-head-dim", f, ("+ head) * head_dim;", "+ head) * 128;")),
        mutate(t, "values-read-heads-major", f, ("((long long)token * num_heads + head) * head_dim",
                                                 "((long long)head * num_tokens + token) * head_dim")),
    ]


def variants() -> list[Variant]:
    f, r = "fault", "rewrite"
    a, b = "merge_attn_states_lse", "merge_state"
    out = _common(a, "expf", "logf") + _common(b, "exp2f", "log2f")
    out += [
        mutate(a, "log2-instead-of-ln", f, ("expf(pa - m)", "exp2f(pa - m)"), ("expf(pb - m)", "exp2f(pb - m)"),
               ("logf(total)", "log2f(total)")),
        mutate(a, "plus-inf-not-empty", f, ("  if (fabsf(pa) == __int_as_float(0x7f800000)) pa = neg_inf();  // +inf counts as empty\n", "")),
        mutate(a, "lse-token-major", f, ("(long long)head * num_tokens + token", "(long long)token * num_heads + head")),
        mutate(b, "ln-instead-of-log2", f, ("exp2f(pa - m)", "expf(pa - m)"), ("exp2f(pb - m)", "expf(pb - m)"),
               ("log2f(total)", "logf(total)")),
        mutate(b, "lse-heads-major", f, ("(long long)token * num_heads + head;\n", "(long long)head * num_tokens + token;\n")),
        # rewrites
        relaunch(a, "block-32", "32"), relaunch(a, "block-256", "256"),
        relaunch(b, "block-64", "64"), relaunch(b, "block-1024", "1024"),
        mutate(a, "fast-intrinsics", r, ("expf(pa - m)", "__expf(pa - m)"), ("expf(pb - m)", "__expf(pb - m)"),
               ("logf(total)", "__logf(total)"), (W, "    wa = __fdividef(ea, total);\n    wb = __fdividef(eb, total);")),
        mutate(b, "fast-intrinsics", r, ("log2f(total)", "__log2f(total)"), (W, "    const float inv = 1.0f / total;\n    wa = ea * inv;\n    wb = eb * inv;")),
        mutate(a, "ldg-loads", r, ("to_float(v_a[base + i])", "to_float(__ldg(&v_a[base + i]))"),
               ("to_float(v_b[base + i])", "to_float(__ldg(&v_b[base + i]))")),
        mutate(b, "fma-merge", r, ("to_float(v_a[base + i]) * wa + to_float(v_b[base + i]) * wb",
                                   "fmaf(to_float(v_a[base + i]), wa, to_float(v_b[base + i]) * wb)")),
    ]
    return out
