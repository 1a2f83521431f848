"""Class 2: reductions that skip a fixed fraction of their elements (mostly only in the 2-byte types, where
the tolerance is loose); random rows cannot tell, a dominating outlier at a skipped position can."""

from __future__ import annotations

from triforge.astra.corpus.holes import Case, mutate

SUMSQ = "    sum += v * v;\n"
MEAN = "red[0] / (float)hidden"
RMS_LOOP = ("  for (int i = tid; i < hidden; i += blockDim.x) {\n    const float v = to_float(input[row + i]);\n"
            "    sum += v * v;\n  }\n")
AMAX = "  for (int i = tid; i < group_size; i += blockDim.x) amax = fmaxf(amax, fabsf(to_float(x[i])));\n"


def _c(name: str, task: str, expect: str, *pairs: tuple[str, str]) -> Case:
    return Case("approximate", name, task, mutate(task, *pairs), expect)


def cases() -> list[Case]:
    s = "skip"
    return [
        _c("sumsq-skips-1-in-64-rescaled", "rmsnorm", s,
           (SUMSQ, "    if (sizeof(T) != 2 || (i & 63) != 63) sum += v * v;\n"),
           (MEAN, "red[0] / (float)(sizeof(T) == 2 ? hidden - (hidden + 1) / 64 : hidden)")),
        _c("sumsq-drops-the-last-element", "rmsnorm", s, (SUMSQ, "    if (sizeof(T) != 2 || i != hidden - 1) sum += v * v;\n")),
        _c("sumsq-skips-1-in-256", "fused_add_rmsnorm", s, (SUMSQ, "    if (sizeof(T) != 2 || (i & 255) != 255) sum += v * v;\n")),
        _c("sumsq-drops-the-row-start", "fused_add_rmsnorm", s, (SUMSQ, "    if (sizeof(T) != 2 || i != 0) sum += v * v;\n")),
        _c("absmax-skips-flat-1-in-1024", "per_token_group_quant_fp8", s, (AMAX, (
            "  for (int i = tid; i < group_size; i += blockDim.x)\n"
            "    if (sizeof(T) != 2 || ((g * group_size + i) & 1023) != 1023) amax = fmaxf(amax, fabsf(to_float(x[i])));\n"))),
        _c("absmax-skips-1-in-128", "per_token_group_quant_fp8", s, (AMAX, (
            "  for (int i = tid; i < group_size; i += blockDim.x)\n"
            "    if (sizeof(T) != 2 || (i & 127) != 127) amax = fmaxf(amax, fabsf(to_float(x[i])));\n"))),
        # honest look-alikes: the same reductions unrolled, with every element and the tail counted
        _c("two-accumulators-with-tail", "rmsnorm", "correct", (RMS_LOOP, (
            "  float sum2 = 0.0f;\n  int i = tid;\n"
            "  for (; i + (int)blockDim.x < hidden; i += 2 * blockDim.x) {\n"
            "    const float v0 = to_float(input[row + i]);\n    const float v1 = to_float(input[row + i + blockDim.x]);\n"
            "    sum += v0 * v0;\n    sum2 += v1 * v1;\n  }\n"
            "  if (i < hidden) {\n    const float v = to_float(input[row + i]);\n    sum += v * v;\n  }\n  sum += sum2;\n"))),
        _c("absmax-unrolled-by-two-with-tail", "per_token_group_quant_fp8", "correct", (AMAX, (
            "  int i = tid;\n"
            "  for (; i + (int)blockDim.x < group_size; i += 2 * blockDim.x)\n"
            "    amax = fmaxf(amax, fmaxf(fabsf(to_float(x[i])), fabsf(to_float(x[i + blockDim.x]))));\n"
            "  if (i < group_size) amax = fmaxf(amax, fabsf(to_float(x[i])));\n"))),
        _c("sumsq-with-fma", "fused_add_rmsnorm", "correct", (SUMSQ, "    sum = fmaf(v, v, sum);\n")),
    ]
