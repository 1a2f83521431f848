// Baseline silu_and_mul: one block per token, a strided loop over the d outputs, math in float32.
// @launch grid: num_tokens
// @launch block: min(d, 1024)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

template <typename T>
__global__ void silu_and_mul_kernel(T* __restrict__ out, const T* __restrict__ input, int d) {
  const long long token = blockIdx.x;
  const T* x = input + token * 2 * d;
  const T* y = x + d;
  T* o = out + token * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float a = to_float(x[i]);
    const float b = to_float(y[i]);
    o[i] = from_float<T>(silu(a) * b);
  }
}
