// Baseline rotary_embedding: one block per token; threads stride over (head, pair) for the query heads,
// then for the key heads; each pair is read, rotated in float32 and written back in place.
// @launch grid: num_tokens
// @launch block: min(num_heads * head_size // 2, 512)
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
__device__ __forceinline__ void rotate_pair(T* __restrict__ x, const T* __restrict__ cache, int i, int embed,
                                            int is_neox) {
  const float c = to_float(cache[i]);
  const float s = to_float(cache[embed + i]);
  const int xi = is_neox ? i : 2 * i;
  const int yi = is_neox ? embed + i : 2 * i + 1;
  const float a = to_float(x[xi]);
  const float b = to_float(x[yi]);
  x[xi] = from_float<T>(a * c - b * s);
  x[yi] = from_float<T>(b * c + a * s);
}

template <typename T>
__global__ void rotary_embedding_kernel(const long long* __restrict__ positions, T* __restrict__ query,
                                        T* __restrict__ key, const T* __restrict__ cos_sin_cache, int num_heads,
                                        int num_kv_heads, int head_size, int rot_dim, int is_neox) {
  const long long token = blockIdx.x;
  const long long pos = positions[token];
  const T* cache = cos_sin_cache + pos * rot_dim;
  const int embed = rot_dim / 2;
  for (int k = threadIdx.x; k < num_heads * embed; k += blockDim.x) {
    const int head = k / embed;
    T* q = query + (token * num_heads + head) * head_size;
    rotate_pair(q, cache, k % embed, embed, is_neox);
  }
  for (int k = threadIdx.x; k < num_kv_heads * embed; k += blockDim.x) {
    const int head = k / embed;
    T* kp = key + (token * num_kv_heads + head) * head_size;
    rotate_pair(kp, cache, k % embed, embed, is_neox);
  }
}
