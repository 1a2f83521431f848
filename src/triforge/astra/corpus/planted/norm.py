"""rmsnorm and fused_add_rmsnorm: planted faults and mutation rewrites."""

from __future__ import annotations

from triforge.astra.corpus.planted.variants import Variant, mutate, relaunch

RSTD = "if (tid == 0) s_rstd = rsqrtf(red[0] / (float)hidden + eps);"
TREE = "if (tid < s && tid + s < blockDim.x) red[tid] += red[tid + s];\n    __syncthreads();"
SYNC_RSTD = "s_rstd = rsqrtf(red[0] / (float)hidden + eps);\n  __syncthreads();"


def _common(t: str) -> list[Variant]:
    f = "fault"
    return [
        mutate(t, "eps-outside-rsqrt", f, (RSTD, RSTD.replace("(float)hidden + eps)", "(float)hidden) + eps"))),
        mutate(t, "missing-syncthreads-in-reduction", f, (TREE, TREE.replace("\n    __syncthreads();", ""))),
        mutate(t, "missing-syncthreads-before-rstd", f, (SYNC_RSTD, SYNC_RSTD.replace("\n  __syncthreads();", ""))),
        mutate(t, "mean-over-blockdim", f, ("red[0] / (float)hidden", "red[0] / (float)blockDim.x")),
        mutate(t, "reduction-starts-at-256", f, ("for (int s = 512; s > 0; s >>= 1)", "for (int s = 256; s > 0; s >>= 1)")),
        mutate(t, "hard-coded-hidden", f, ("(long long)blockIdx.x * hidden", "(long long)blockIdx.x * 4096")),
        mutate(t, "weight-indexed-by-thread", f, ("to_float(weight[i])", "to_float(weight[tid])")),
        mutate(t, "fp16-reduction", f, ("red[tid] += red[tid + s];", "red[tid] = __half2float(__float2half(red[tid] + red[tid + s]));")),
        mutate(t, "mean-over-hidden-minus-one", f, ("red[0] / (float)hidden", "red[0] / (float)(hidden - 1)")),
    ]


def variants() -> list[Variant]:
    f, r = "fault", "rewrite"
    n, fa = "rmsnorm", "fused_add_rmsnorm"
    out = _common(n) + _common(fa)
    out += [
        mutate(n, "tail-off-by-one", f, ("for (int i = tid; i < hidden; i += blockDim.x) {\n    out[",
                                         "for (int i = tid; i < hidden - 1; i += blockDim.x) {\n    out[")),
        mutate(fa, "tail-off-by-one", f, ("for (int i = tid; i < hidden; i += blockDim.x) {\n    const T r",
                                          "for (int i = tid; i < hidden - 1; i += blockDim.x) {\n    const T r")),
        mutate(fa, "residual-not-stored", f, ("    residual[row + i] = r;\n", "")),
        mutate(fa, "normalizes-input-not-residual", f, ("to_float(residual[row + i]) * rstd", "to_float(input[row + i]) * rstd")),
        mutate(fa, "variance-of-input", f, ("const float v = to_float(r);", "const float v = to_float(input[row + i]);")),
        # rewrites
        relaunch(n, "block-96", "96"), relaunch(n, "block-1024", "1024"),
        relaunch(fa, "block-160", "160"), relaunch(fa, "block-1024", "1024"),
        mutate(n, "fast-divide", r, ("rsqrtf(red[0] / (float)hidden + eps)", "rsqrtf(__fdividef(red[0], (float)hidden) + eps)")),
        mutate(fa, "fast-divide", r, ("rsqrtf(red[0] / (float)hidden + eps)", "rsqrtf(red[0] * (1.0f / (float)hidden) + eps)")),
        mutate(n, "ldg-weight", r, ("to_float(weight[i])", "to_float(__ldg(&weight[i]))"),
               ("to_float(input[row + i])", "to_float(__ldg(&input[row + i]))"), all_occurrences=True),
        mutate(fa, "unrolled-loops", r, ("for (int i = tid; i < hidden; i += blockDim.x) {",
                                         "#pragma unroll 4\n  for (int i = tid; i < hidden; i += blockDim.x) {"), all_occurrences=True),
    ]
    return out
