"""Structural rewrites (whole files) that must pass: vectorized loads, warp shuffles, other geometries."""

from __future__ import annotations

from triforge.astra.corpus.planted.variants import Variant
from triforge.astra.task import get_task


def prelude() -> str:
    src = get_task("silu_and_mul").baseline_source()
    start = src.index("#include <cuda_bf16.h>")
    end = src.index("\n", src.index("from_float<__nv_bfloat16>(float x)")) + 1
    return src[start:end]


ACT_VEC = """
// @launch grid: num_tokens
// @launch block: 256
{act}
template <typename T>
__global__ void {name}_kernel(T* __restrict__ out, const T* __restrict__ input, int d) {{
  const long long token = blockIdx.x;
  const T* x = input + token * 2 * d;
  const T* y = x + d;
  T* o = out + token * d;
  constexpr int V = 16 / sizeof(T);
  const unsigned long long bits = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y) |
                                  reinterpret_cast<unsigned long long>(o);
  int done = 0;
  if ((bits & 15ull) == 0) {{
    const int nvec = d / V;
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) {{
      const uint4 xa = reinterpret_cast<const uint4*>(x)[v];
      const uint4 ya = reinterpret_cast<const uint4*>(y)[v];
      uint4 oa;
      const T* xe = reinterpret_cast<const T*>(&xa);
      const T* ye = reinterpret_cast<const T*>(&ya);
      T* oe = reinterpret_cast<T*>(&oa);
#pragma unroll
      for (int j = 0; j < V; ++j) oe[j] = from_float<T>({fn}(to_float(xe[j])) * to_float(ye[j]));
      reinterpret_cast<uint4*>(o)[v] = oa;
    }}
    done = nvec * V;
  }}
  for (int i = done + threadIdx.x; i < d; i += blockDim.x) o[i] = from_float<T>({fn}(to_float(x[i])) * to_float(y[i]));
}}
"""

SILU = "__device__ __forceinline__ float act(float x) { return x / (1.0f + __expf(-x)); }\n"
GELU = ("__device__ __forceinline__ float act(float x) {\n"
        "  const float u = 0.7978845608028654f * fmaf(0.044715f * x, x * x, x);\n"
        "  return 0.5f * x * (1.0f + tanhf(u));\n}\n")

NORM_WARP = """
// @launch grid: num_tokens
// @launch block: 256
__device__ __forceinline__ float warp_sum(float v) {{
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}}

template <typename T>
__global__ void {name}_kernel({params}) {{
  __shared__ float warp_sums[32];
  __shared__ float s_rstd;
  const long long row = (long long)blockIdx.x * hidden;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float sum = 0.0f;
  for (int i = tid; i < hidden; i += blockDim.x) {{
    {load}
    sum += v * v;
  }}
  sum = warp_sum(sum);
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {{
    float s = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) s_rstd = rsqrtf(s / (float)hidden + eps);
  }}
  __syncthreads();
  const float rstd = s_rstd;
  for (int i = tid; i < hidden; i += blockDim.x) {{
    {store}
  }}
}}
"""

MERGE_WARP = """
// @launch grid: cdiv(num_tokens * num_heads, 4)
// @launch block: 128
template <typename T>
__global__ void {name}_kernel(T* __restrict__ out, float* __restrict__ out_lse, const T* __restrict__ v_a,
    const float* __restrict__ s_a, const T* __restrict__ v_b, const float* __restrict__ s_b, int num_tokens,
    int num_heads, int head_dim) {{
  const int pair = blockIdx.x * 4 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (pair >= num_tokens * num_heads) return;
  const int token = pair / num_heads, head = pair % num_heads;
  const long long li = {lse_index};
  float pa = __ldg(&s_a[li]), pb = __ldg(&s_b[li]);
  {inf_rule}
  const float m = fmaxf(pa, pb);
  const bool empty = m == __int_as_float(0xff800000);
  const float ea = empty ? 0.0f : {exp}(pa - m), eb = empty ? 0.0f : {exp}(pb - m);
  const float total = ea + eb;
  const float inv = empty ? 0.0f : 1.0f / total;
  const long long base = (long long)pair * head_dim;
  for (int i = lane; i < head_dim; i += 32)
    out[base + i] = from_float<T>(to_float(v_a[base + i]) * (ea * inv) + to_float(v_b[base + i]) * (eb * inv));
  if (lane == 0) out_lse[li] = empty ? __int_as_float(0xff800000) : {log}(total) + m;
}}
"""

ROTARY_FLAT = """
// @launch grid: num_tokens * (num_heads + num_kv_heads)
// @launch block: head_size // 2
template <typename T>
__global__ void rotary_embedding_kernel(const long long* __restrict__ positions, T* __restrict__ query,
    T* __restrict__ key, const T* __restrict__ cos_sin_cache, int num_heads, int num_kv_heads, int head_size,
    int rot_dim, int is_neox) {
  const int embed = rot_dim / 2;
  const int heads = num_heads + num_kv_heads;
  const long long token = blockIdx.x / heads;
  const int head = blockIdx.x % heads;
  T* x = head < num_heads ? query + (token * num_heads + head) * head_size
                          : key + (token * num_kv_heads + (head - num_heads)) * head_size;
  const T* cache = cos_sin_cache + __ldg(&positions[token]) * rot_dim;
  for (int i = threadIdx.x; i < embed; i += blockDim.x) {
    const float c = to_float(cache[i]), s = to_float(cache[embed + i]);
    const int xi = is_neox ? i : 2 * i, yi = is_neox ? embed + i : 2 * i + 1;
    const float a = to_float(x[xi]), b = to_float(x[yi]);
    x[xi] = from_float<T>(a * c - b * s);
    x[yi] = from_float<T>(b * c + a * s);
  }
}
"""

FP8_WARP = """#include <cuda_fp8.h>
// @launch grid: cdiv(num_tokens * (hidden // group_size), 8)
// @launch block: 256
template <typename T>
__global__ void per_token_group_quant_fp8_kernel(const T* __restrict__ input, unsigned char* __restrict__ out_q,
                                                 float* __restrict__ out_s, int group_size, int num_groups, float eps) {
  const long long g = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (g >= num_groups) return;
  const T* x = input + g * group_size;
  float amax = 0.0f;
  for (int i = lane; i < group_size; i += 32) amax = fmaxf(amax, fabsf(to_float(x[i])));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float scale = fmaxf(amax, eps) / 448.0f;
  if (lane == 0) out_s[g] = scale;
  for (int i = lane; i < group_size; i += 32) {
    const float q = fminf(fmaxf(to_float(x[i]) / scale, -448.0f), 448.0f);
    out_q[g * group_size + i] = __nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3);
  }
}
"""

NORM_PARAMS = {
    "rmsnorm": ("T* __restrict__ out, const T* __restrict__ input, const T* __restrict__ weight, int hidden, float eps",
                "const float v = to_float(input[row + i]);",
                "out[row + i] = from_float<T>(to_float(input[row + i]) * rstd * to_float(weight[i]));"),
    "fused_add_rmsnorm": ("T* __restrict__ input, T* __restrict__ residual, const T* __restrict__ weight, int hidden, float eps",
                          "const T r = from_float<T>(to_float(input[row + i]) + to_float(residual[row + i]));\n"
                          "    residual[row + i] = r;\n    const float v = to_float(r);",
                          "input[row + i] = from_float<T>(to_float(residual[row + i]) * rstd * to_float(weight[i]));"),
}


def variants() -> list[Variant]:
    p = prelude()
    out = [
        Variant("silu_and_mul", "vectorized-16B", "rewrite", p + ACT_VEC.format(act=SILU, name="silu_and_mul", fn="act")),
        Variant("gelu_tanh_and_mul", "vectorized-16B", "rewrite", p + ACT_VEC.format(act=GELU, name="gelu_tanh_and_mul", fn="act")),
        Variant("rotary_embedding", "one-thread-per-pair", "rewrite", p + ROTARY_FLAT),
        Variant("per_token_group_quant_fp8", "warp-per-group-shuffle", "rewrite", p + FP8_WARP),
    ]
    for name, (params, load, store) in NORM_PARAMS.items():
        out.append(Variant(name, "warp-shuffle-reduction", "rewrite",
                           p + NORM_WARP.format(name=name, params=params, load=load, store=store)))
    inf_rule = ("if (fabsf(pa) == __int_as_float(0x7f800000)) pa = __int_as_float(0xff800000);\n"
                "  if (fabsf(pb) == __int_as_float(0x7f800000)) pb = __int_as_float(0xff800000);")
    out.append(Variant("merge_attn_states_lse", "warp-per-head", "rewrite", p + MERGE_WARP.format(
        name="merge_attn_states_lse", lse_index="(long long)head * num_tokens + token", inf_rule=inf_rule,
        exp="__expf", log="__logf")))
    out.append(Variant("merge_state", "warp-per-head", "rewrite", p + MERGE_WARP.format(
        name="merge_state", lse_index="(long long)token * num_heads + head", inf_rule="", exp="exp2f", log="log2f")))
    return out
