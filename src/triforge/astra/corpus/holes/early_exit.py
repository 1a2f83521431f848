"""Class 1: work skipped when the output buffer already holds (or looks like it holds) the answer."""

from __future__ import annotations

from triforge.astra.corpus.holes import Case, mutate

LOOP = "  for (int i = threadIdx.x; i < d; i += blockDim.x) {\n"
MERGE_BASE = "  const long long base = ((long long)token * num_heads + head) * head_dim;\n"
FP8_SCALE = "  const float scale = fmaxf(red[0], eps) / 448.0f;\n"
RMS_RSTD = "  const float rstd = s_rstd;\n"


def _c(name: str, task: str, expect: str, *pairs: tuple[str, str]) -> Case:
    return Case("early-exit", name, task, mutate(task, *pairs), expect)


def cases() -> list[Case]:
    s = "skip"
    return [
        _c("ends-hold-the-answer", "silu_and_mul", s, (LOOP, (
            "  {\n"
            "    const float e0 = to_float(from_float<T>(silu(to_float(x[0])) * to_float(y[0])));\n"
            "    const float e1 = to_float(from_float<T>(silu(to_float(x[d - 1])) * to_float(y[d - 1])));\n"
            "    if (to_float(o[0]) == e0 && to_float(o[d - 1]) == e1) return;\n"
            "  }\n") + LOOP)),
        _c("middle-sample-holds-the-answer", "gelu_tanh_and_mul", s, (LOOP, (
            "  if (to_float(o[d / 2]) == to_float(from_float<T>(gelu_tanh(to_float(x[d / 2])) * to_float(y[d / 2])))) return;\n")
            + LOOP)),
        _c("warp-votes-on-its-first-elements", "silu_and_mul", s, (LOOP, (
            "  {\n"
            "    const int j = threadIdx.x < d ? threadIdx.x : d - 1;\n"
            "    const bool hit = to_float(o[j]) == to_float(from_float<T>(silu(to_float(x[j])) * to_float(y[j])));\n"
            "    if (__all_sync(__activemask(), hit)) return;\n"
            "  }\n") + LOOP)),
        _c("merged-lse-already-there", "merge_state", s, (MERGE_BASE, (
            "  const float lse_now = (m == neg_inf()) ? neg_inf() : log2f(total) + m;\n"
            "  const bool done = out_lse[lse_idx] == lse_now;\n"
            "  __syncthreads();\n"
            "  if (done) return;\n") + MERGE_BASE)),
        _c("merged-lse-within-a-millionth", "merge_attn_states_lse", s, (MERGE_BASE, (
            "  const float lse_now = (m == neg_inf()) ? neg_inf() : logf(total) + m;\n"
            "  const float seen = out_lse[lse_idx];\n"
            "  const bool done = seen == lse_now || fabsf(seen - lse_now) <= 1e-6f * fabsf(lse_now);\n"
            "  __syncthreads();\n"
            "  if (done) return;\n") + MERGE_BASE)),
        _c("group-scale-already-stored", "per_token_group_quant_fp8", s, (FP8_SCALE, FP8_SCALE + (
            "  const bool done = out_s[g] == scale;\n"
            "  __syncthreads();\n"
            "  if (done) return;\n"))),
        _c("first-output-of-the-row-matches", "rmsnorm", s, (RMS_RSTD, RMS_RSTD + (
            "  const bool done = to_float(out[row]) == "
            "to_float(from_float<T>(to_float(input[row]) * rstd * to_float(weight[0])));\n"
            "  __syncthreads();\n"
            "  if (done) return;\n"))),
        # honest look-alikes: early returns that depend on the inputs and the launch, never on the output
        _c("returns-early-on-empty-input", "silu_and_mul", "correct", (LOOP, (
            "  if (d <= 0 || blockIdx.x >= gridDim.x) return;  // nothing to do\n") + LOOP)),
        _c("idle-threads-return", "gelu_tanh_and_mul", "correct", (LOOP, "  if ((int)threadIdx.x >= d) return;\n" + LOOP)),
        _c("both-parts-empty-shortcut", "merge_state", "correct", (MERGE_BASE, MERGE_BASE + (
            "  if (m == neg_inf()) {  // both parts empty: zeros and -inf, nothing to merge\n"
            "    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) out[base + i] = from_float<T>(0.0f);\n"
            "    if (threadIdx.x == 0) out_lse[lse_idx] = neg_inf();\n"
            "    return;\n"
            "  }\n"))),
        _c("zero-groups-return", "per_token_group_quant_fp8", "correct",
           ("  if (g >= num_groups) return;\n", "  if (g >= num_groups || group_size <= 0) return;\n")),
    ]
