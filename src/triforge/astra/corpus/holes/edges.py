"""Class 5: edge cases the old special set masked (specials planted in every operand at once put zero value
rows under the empty LSEs), +inf in the second part only, and 32-bit offsets, which `check` now reaches
with its own pass past 2^31 elements when the device has the memory."""

from __future__ import annotations

from triforge.astra.corpus.holes import Case, mutate

MERGE_BASE = "  const long long base = ((long long)token * num_heads + head) * head_dim;\n"
PB_INF = "  if (fabsf(pb) == __int_as_float(0x7f800000)) pb = neg_inf();\n"
EXP2_WEIGHTS = "    wa = ea / total;\n    wb = eb / total;\n"


def _c(name: str, task: str, expect: str, *pairs: tuple[str, str], shapes: str = "train") -> Case:
    return Case("edges", name, task, mutate(task, *pairs), expect, shapes)


def cases() -> list[Case]:
    i = "incorrect"
    return [
        _c("plus-inf-handled-only-in-the-first-part", "merge_attn_states_lse", i, (PB_INF, "")),
        _c("empty-first-part-zeroes-the-output", "merge_attn_states_lse", i, (MERGE_BASE, (
            "  if (s_a[lse_idx] == neg_inf() && pb != neg_inf()) { wa = 0.0f; wb = 0.0f; }\n") + MERGE_BASE)),
        _c("empty-second-part-zeroes-the-output", "merge_state", i, (MERGE_BASE, (
            "  if (pb == neg_inf() && pa != neg_inf()) { wa = 0.0f; wb = 0.0f; }\n") + MERGE_BASE)),
        _c("empty-first-part-takes-its-values", "merge_state", i, (MERGE_BASE, (
            "  if (pa == neg_inf() && pb != neg_inf()) { wa = 1.0f; wb = 0.0f; }\n") + MERGE_BASE)),
        # 32-bit offsets: right below 2^31 elements, wrong (or out of bounds) past it
        _c("int-token-offset", "silu_and_mul", "bug", ("const long long token = blockIdx.x;", "const int token = blockIdx.x;")),
        _c("int-row-offset", "rmsnorm", "bug",
           ("const long long row = (long long)blockIdx.x * hidden;", "const int row = blockIdx.x * hidden;")),
        _c("int-group-offset", "per_token_group_quant_fp8", "bug", ("const long long g = blockIdx.x;", "const int g = blockIdx.x;")),
        # honest look-alikes
        _c("isinf-spelling", "merge_attn_states_lse", "correct",
           ("  if (fabsf(pa) == __int_as_float(0x7f800000)) pa = neg_inf();  // +inf counts as empty\n",
            "  if (isinf(pa)) pa = neg_inf();  // +inf counts as empty\n"), (PB_INF, "  if (isinf(pb)) pb = neg_inf();\n")),
        _c("sigmoid-weights-guarded", "merge_state", "correct", (EXP2_WEIGHTS, (
            "    wa = (pa == neg_inf()) ? 0.0f : 1.0f / (1.0f + exp2f(pb - pa));\n    wb = 1.0f - wa;\n"))),
        _c("size-t-row-offset", "rmsnorm", "correct",
           ("const long long row = (long long)blockIdx.x * hidden;", "const size_t row = (size_t)blockIdx.x * hidden;")),
    ]
