// Baseline merge_attn_states_lse: one block per (token, head); every thread reads both LSEs, forms the two weights and
// merges a strided slice of head_dim; thread 0 writes the merged LSE.
// @launch grid: num_tokens * num_heads
// @launch block: head_dim
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

template <typename T>
__global__ void merge_attn_states_lse_kernel(T* __restrict__ out, float* __restrict__ out_lse, const T* __restrict__ v_a,
                                              const float* __restrict__ s_a, const T* __restrict__ v_b, const float* __restrict__ s_b,
                                              int num_tokens, int num_heads, int head_dim) {
  const int token = blockIdx.x / num_heads;
  const int head = blockIdx.x % num_heads;
  const long long lse_idx = (long long)head * num_tokens + token;
  float pa = s_a[lse_idx];
  float pb = s_b[lse_idx];
  if (fabsf(pa) == __int_as_float(0x7f800000)) pa = neg_inf();  // +inf counts as empty
  if (fabsf(pb) == __int_as_float(0x7f800000)) pb = neg_inf();
  const float m = fmaxf(pa, pb);
  float wa = 0.0f, wb = 0.0f, total = 0.0f;
  if (m != neg_inf()) {
    const float ea = expf(pa - m);
    const float eb = expf(pb - m);
    total = ea + eb;
    wa = ea / total;
    wb = eb / total;
  }
  const long long base = ((long long)token * num_heads + head) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    out[base + i] = from_float<T>(to_float(v_a[base + i]) * wa + to_float(v_b[base + i]) * wb);
  }
  if (threadIdx.x == 0) out_lse[lse_idx] = (m == neg_inf()) ? neg_inf() : logf(total) + m;
}
