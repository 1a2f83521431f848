// Baseline fused_add_rmsnorm: one block per token; residual = input + residual (stored rounded), the
// sum of squares of the rounded residual through a shared-memory tree, then input = residual / rms * weight.
// @launch grid: num_tokens
// @launch block: min(hidden, 1024)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <typename T>
__global__ void fused_add_rmsnorm_kernel(T* __restrict__ input, T* __restrict__ residual, const T* __restrict__ weight,
                                         int hidden, float eps) {
  __shared__ float red[1024];
  __shared__ float s_rstd;
  const long long row = (long long)blockIdx.x * hidden;
  const int tid = threadIdx.x;
  float sum = 0.0f;
  for (int i = tid; i < hidden; i += blockDim.x) {
    const T r = from_float<T>(to_float(input[row + i]) + to_float(residual[row + i]));
    residual[row + i] = r;
    const float v = to_float(r);
    sum += v * v;
  }
  red[tid] = sum;
  __syncthreads();
  for (int s = 512; s > 0; s >>= 1) {
    if (tid < s && tid + s < blockDim.x) red[tid] += red[tid + s];
    __syncthreads();
  }
  if (tid == 0) s_rstd = rsqrtf(red[0] / (float)hidden + eps);
  __syncthreads();
  const float rstd = s_rstd;
  for (int i = tid; i < hidden; i += blockDim.x) {
    input[row + i] = from_float<T>(to_float(residual[row + i]) * rstd * to_float(weight[i]));
  }
}
