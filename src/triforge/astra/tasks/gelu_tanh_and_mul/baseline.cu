// Baseline gelu_tanh_and_mul: one block per token, a strided loop over the d outputs, math in float32.
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

__device__ __forceinline__ float gelu_tanh(float x) {
  const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
  const float k1 = 0.044715f;
  const float inner = k0 * (x + k1 * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

template <typename T>
__global__ void gelu_tanh_and_mul_kernel(T* __restrict__ out, const T* __restrict__ input, int d) {
  const long long token = blockIdx.x;
  const T* x = input + token * 2 * d;
  const T* y = x + d;
  T* o = out + token * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float a = to_float(x[i]);
    const float b = to_float(y[i]);
    o[i] = from_float<T>(gelu_tanh(a) * b);
  }
}
