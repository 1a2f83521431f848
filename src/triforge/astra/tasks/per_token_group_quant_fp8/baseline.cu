// Baseline per_token_group_quant_fp8: one block per group; a shared-memory tree finds the group's absmax,
// then every thread divides its values by the scale, clamps and converts to e4m3 (round to nearest even).
// @launch grid: num_tokens * (hidden // group_size)
// @launch block: min(group_size, 1024)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
#include <cuda_fp8.h>

template <typename T>
__global__ void per_token_group_quant_fp8_kernel(const T* __restrict__ input, unsigned char* __restrict__ out_q,
                                                 float* __restrict__ out_s, int group_size, int num_groups, float eps) {
  __shared__ float red[1024];
  const long long g = blockIdx.x;
  if (g >= num_groups) return;
  const T* x = input + g * group_size;
  const int tid = threadIdx.x;
  float amax = 0.0f;
  for (int i = tid; i < group_size; i += blockDim.x) amax = fmaxf(amax, fabsf(to_float(x[i])));
  red[tid] = amax;
  __syncthreads();
  for (int s = 512; s > 0; s >>= 1) {
    if (tid < s && tid + s < blockDim.x) red[tid] = fmaxf(red[tid], red[tid + s]);
    __syncthreads();
  }
  const float scale = fmaxf(red[0], eps) / 448.0f;
  if (tid == 0) out_s[g] = scale;
  for (int i = tid; i < group_size; i += blockDim.x) {
    const float q = fminf(fmaxf(to_float(x[i]) / scale, -448.0f), 448.0f);
    out_q[g * group_size + i] = __nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3);
  }
}
