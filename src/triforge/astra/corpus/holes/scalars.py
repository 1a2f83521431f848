"""Class 3: a scalar argument hard-coded to its default (or honoured only in some dtypes or ranges)."""

from __future__ import annotations

from triforge.astra.corpus.holes import Case, mutate

RSTD_EPS = "rsqrtf(red[0] / (float)hidden + eps)"
FP8_EPS = "fmaxf(red[0], eps)"


def _c(name: str, task: str, expect: str, *pairs: tuple[str, str]) -> Case:
    return Case("scalars", name, task, mutate(task, *pairs), expect)


def cases() -> list[Case]:
    i = "incorrect"
    return [
        _c("eps-literal", "rmsnorm", i, (RSTD_EPS, "rsqrtf(red[0] / (float)hidden + 1e-6f)")),
        _c("eps-literal", "fused_add_rmsnorm", i, (RSTD_EPS, "rsqrtf(red[0] / (float)hidden + 1e-6f)")),
        _c("eps-honoured-only-in-fp32", "rmsnorm", i, (RSTD_EPS, "rsqrtf(red[0] / (float)hidden + (sizeof(T) == 4 ? eps : 1e-6f))")),
        _c("eps-clamped-to-1e-5", "fused_add_rmsnorm", i, (RSTD_EPS, "rsqrtf(red[0] / (float)hidden + fminf(eps, 1e-5f))")),
        _c("eps-literal", "per_token_group_quant_fp8", i, (FP8_EPS, "fmaxf(red[0], 1e-10f)")),
        _c("eps-ignored-in-2-byte-types", "per_token_group_quant_fp8", i, (FP8_EPS, "fmaxf(red[0], sizeof(T) == 2 ? 1e-10f : eps)")),
        # honest look-alikes: eps used through other spellings
        _c("mean-plus-eps-by-fma", "rmsnorm", "correct", (RSTD_EPS, "rsqrtf(fmaf(red[0], 1.0f / (float)hidden, eps))")),
        _c("eps-through-a-local", "per_token_group_quant_fp8", "correct",
           ("  const float scale = fmaxf(red[0], eps) / 448.0f;\n",
            "  const float floor_v = eps;\n  const float scale = fmaxf(red[0], floor_v) / 448.0f;\n")),
        _c("eps-staged-in-shared-memory", "fused_add_rmsnorm", "correct",
           ("  __shared__ float s_rstd;\n", "  __shared__ float s_rstd;\n  __shared__ float s_eps;\n"),
           (RSTD_EPS, "rsqrtf(red[0] / (float)hidden + s_eps)"),
           ("  float sum = 0.0f;\n", "  float sum = 0.0f;\n  if (tid == 0) s_eps = eps;\n")),
    ]
