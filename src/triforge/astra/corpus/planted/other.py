"""rotary_embedding and per_token_group_quant_fp8: planted faults and mutation rewrites."""

from __future__ import annotations

from triforge.astra.corpus.planted.variants import Variant, mutate, relaunch

Q_LOOP = "for (int k = threadIdx.x; k < num_heads * embed; k += blockDim.x) {"
TREE = "if (tid < s && tid + s < blockDim.x) red[tid] = fmaxf(red[tid], red[tid + s]);\n    __syncthreads();"


def variants() -> list[Variant]:
    f, r = "fault", "rewrite"
    ro, q = "rotary_embedding", "per_token_group_quant_fp8"
    return [
        mutate(ro, "neox-and-interleaved-swapped", f, ("const int xi = is_neox ? i : 2 * i;", "const int xi = is_neox ? 2 * i : i;"),
               ("const int yi = is_neox ? embed + i : 2 * i + 1;", "const int yi = is_neox ? 2 * i + 1 : embed + i;")),
        mutate(ro, "sin-sign", f, ("from_float<T>(a * c - b * s)", "from_float<T>(a * c + b * s)")),
        mutate(ro, "token-not-position", f, ("cos_sin_cache + pos * rot_dim", "cos_sin_cache + token * rot_dim")),
        mutate(ro, "key-not-rotated", f, ("    rotate_pair(kp, cache, k % embed, embed, is_neox);\n", "")),
        mutate(ro, "key-uses-query-heads", f, ("(token * num_kv_heads + head)", "(token * num_heads + head)")),
        mutate(ro, "tail-off-by-one", f, (Q_LOOP, Q_LOOP.replace("k < num_heads * embed", "k < num_heads * embed - 1"))),
        mutate(ro, "reads-rotated-value", f, ("x[yi] = from_float<T>(b * c + a * s);", "x[yi] = from_float<T>(b * c + to_float(x[xi]) * s);")),
        mutate(ro, "cos-sin-swapped", f, ("const float c = to_float(cache[i]);", "const float c = to_float(cache[embed + i]);"),
               ("const float s = to_float(cache[embed + i]);", "const float s = to_float(cache[i]);")),
        mutate(ro, "hard-coded-head-size", f, ("(token * num_heads + head) * head_size", "(token * num_heads + head) * 128")),
        mutate(ro, "positions-read-as-int32", f, ("const long long pos = positions[token];",
                                                  "const long long pos = ((const int*)positions)[token];")),
        mutate(q, "fp8-max-240", f, ("fmaxf(red[0], eps) / 448.0f", "fmaxf(red[0], eps) / 240.0f")),
        mutate(q, "eps-ignored", f, ("fmaxf(red[0], eps) / 448.0f", "red[0] / 448.0f")),
        mutate(q, "missing-syncthreads-in-reduction", f, (TREE, TREE.replace("\n    __syncthreads();", ""))),
        mutate(q, "sum-not-max", f, ("red[tid] = fmaxf(red[tid], red[tid + s]);", "red[tid] = red[tid] + red[tid + s];")),
        mutate(q, "abs-missing", f, ("fmaxf(amax, fabsf(to_float(x[i])))", "fmaxf(amax, to_float(x[i]))")),
        mutate(q, "multiply-by-scale", f, ("to_float(x[i]) / scale", "to_float(x[i]) * scale")),
        mutate(q, "hard-coded-group", f, ("out_q[g * group_size + i]", "out_q[g * 128 + i]")),
        mutate(q, "tail-off-by-one", f, ("for (int i = tid; i < group_size; i += blockDim.x) {\n    const float q",
                                         "for (int i = tid; i < group_size - 1; i += blockDim.x) {\n    const float q")),
        mutate(q, "first-scale-never-written", f, ("if (tid == 0) out_s[g] = scale;", "if (tid == 0 && g > 0) out_s[g] = scale;")),
        mutate(q, "e5m2-not-e4m3", f, ("__NV_SATFINITE, __NV_E4M3", "__NV_SATFINITE, __NV_E5M2")),
        # rewrites
        relaunch(ro, "block-64", "64"), relaunch(ro, "block-1024", "1024"),
        relaunch(q, "block-32", "32"), relaunch(q, "block-256", "256"),
        mutate(ro, "fma-rotation", r, ("from_float<T>(a * c - b * s)", "from_float<T>(fmaf(a, c, -b * s))"),
               ("from_float<T>(b * c + a * s)", "from_float<T>(fmaf(b, c, a * s))")),
        mutate(ro, "ldg-cache", r, ("to_float(cache[i])", "to_float(__ldg(&cache[i]))"),
               ("to_float(cache[embed + i])", "to_float(__ldg(&cache[embed + i]))")),
        mutate(q, "multiply-by-inverse-scale", r, ("const float q = fminf(fmaxf(to_float(x[i]) / scale, -448.0f), 448.0f);",
                                                   "const float q = fminf(fmaxf(to_float(x[i]) * inv, -448.0f), 448.0f);"),
               ("if (tid == 0) out_s[g] = scale;", "if (tid == 0) out_s[g] = scale;\n  const float inv = 1.0f / scale;")),
        mutate(q, "ldg-loads", r, ("to_float(x[i])", "to_float(__ldg(&x[i]))"), all_occurrences=True),
    ]
