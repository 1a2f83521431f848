"""Class 4: stores past the end of an output (or an in-place input) view; rows in the middle land in the next
row, the last row in memory the kernel does not own (canaries there). Look-alikes read past a view but
never write there, or handle the tail."""

from __future__ import annotations

from triforge.astra.corpus.holes import Case, mutate

ACT_LOOP = ("  for (int i = threadIdx.x; i < d; i += blockDim.x) {\n    const float a = to_float(x[i]);\n"
            "    const float b = to_float(y[i]);\n    o[i] = from_float<T>(ACT(a) * b);\n  }\n")
RMS_STORE = "  for (int i = tid; i < hidden; i += blockDim.x) {\n    out[row + i]"
FUSED_STORE = "  for (int i = tid; i < hidden; i += blockDim.x) {\n    input[row + i]"
MERGE_LOOP = "  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {\n    out[base + i]"
FP8_STORE = "  for (int i = tid; i < group_size; i += blockDim.x) {\n    const float q"
ROT_KEYS = "  for (int k = threadIdx.x; k < num_kv_heads * embed; k += blockDim.x) {"

# the vectorised kernel of docs/astra.md: 16-byte stores where the row is aligned, a scalar tail
VECTOR_BODY = """  constexpr int V = 16 / sizeof(T);
  int done = 0;
  if (((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y) |
        reinterpret_cast<unsigned long long>(o)) & 15ull) == 0) {
    for (int v = threadIdx.x; v < d / V; v += blockDim.x) {
      const uint4 xa = reinterpret_cast<const uint4*>(x)[v], ya = reinterpret_cast<const uint4*>(y)[v];
      uint4 oa;
      const T* xe = reinterpret_cast<const T*>(&xa);
      const T* ye = reinterpret_cast<const T*>(&ya);
      T* oe = reinterpret_cast<T*>(&oa);
#pragma unroll
      for (int j = 0; j < V; ++j) oe[j] = from_float<T>(silu(to_float(xe[j])) * to_float(ye[j]));
      reinterpret_cast<uint4*>(o)[v] = oa;
    }
    done = d / V * V;
  }
  for (int i = done + threadIdx.x; i < d; i += blockDim.x) o[i] = from_float<T>(silu(to_float(x[i])) * to_float(y[i]));
"""


def _c(name: str, task: str, expect: str, *pairs: tuple[str, str]) -> Case:
    return Case("outside-view", name, task, mutate(task, *pairs), expect)


def _rounded(loop: str, bound: str, multiple: int) -> str:
    return loop.replace(f"< {bound};", f"< (({bound} + {multiple - 1}) & ~{multiple - 1});")


def cases() -> list[Case]:
    i = "incorrect"
    silu, gelu = ACT_LOOP.replace("ACT", "silu"), ACT_LOOP.replace("ACT", "gelu_tanh")
    return [
        _c("pairs-without-a-bound", "silu_and_mul", i, (silu, (
            "  for (int i = 2 * threadIdx.x; i < d; i += 2 * blockDim.x) {\n"
            "    o[i] = from_float<T>(silu(to_float(x[i])) * to_float(y[i]));\n"
            "    o[i + 1] = from_float<T>(silu(to_float(x[i + 1])) * to_float(y[i + 1]));\n  }\n"))),
        _c("unrolled-by-4-without-a-tail", "gelu_tanh_and_mul", i, (gelu, (
            "  for (int i = 4 * threadIdx.x; i < d; i += 4 * blockDim.x) {\n#pragma unroll\n"
            "    for (int j = 0; j < 4; ++j) o[i + j] = from_float<T>(gelu_tanh(to_float(x[i + j])) * to_float(y[i + j]));\n"
            "  }\n"))),
        _c("stores-rounded-up-to-8", "rmsnorm", i, (RMS_STORE, _rounded(RMS_STORE, "hidden", 8))),
        _c("in-place-stores-rounded-up-to-4", "fused_add_rmsnorm", i, (FUSED_STORE, _rounded(FUSED_STORE, "hidden", 4))),
        _c("head-dim-rounded-up-to-32", "merge_state", i, (MERGE_LOOP, _rounded(MERGE_LOOP, "head_dim", 32))),
        _c("codes-rounded-up-to-64", "per_token_group_quant_fp8", i, (FP8_STORE, _rounded(FP8_STORE, "group_size", 64))),
        _c("key-pairs-rounded-up-to-32", "rotary_embedding", i, (ROT_KEYS, _rounded(ROT_KEYS, "num_kv_heads * embed", 32))),
        # honest look-alikes
        _c("vectorised-with-a-scalar-tail", "silu_and_mul", "correct", (silu, VECTOR_BODY)),
        _c("pairs-with-the-odd-tail-checked", "gelu_tanh_and_mul", "correct", (gelu, (
            "  for (int i = 2 * threadIdx.x; i < d; i += 2 * blockDim.x) {\n"
            "    o[i] = from_float<T>(gelu_tanh(to_float(x[i])) * to_float(y[i]));\n"
            "    if (i + 1 < d) o[i + 1] = from_float<T>(gelu_tanh(to_float(x[i + 1])) * to_float(y[i + 1]));\n  }\n"))),
        _c("reads-past-the-row-writes-inside", "rmsnorm", "correct", (
            RMS_STORE + " = from_float<T>(to_float(input[row + i]) * rstd * to_float(weight[i]));",
            _rounded(RMS_STORE.split("\n")[0], "hidden", 8) + "\n"
            "    const float v = to_float(input[row + i]) * rstd * to_float(weight[i]);\n"
            "    if (i < hidden) out[row + i] = from_float<T>(v);")),
        _c("reads-rounded-up-writes-masked", "merge_state", "correct", (
            MERGE_LOOP + " = from_float<T>(to_float(v_a[base + i]) * wa + to_float(v_b[base + i]) * wb);",
            _rounded(MERGE_LOOP.split("\n")[0], "head_dim", 32) + "\n"
            "    const float r = to_float(v_a[base + i]) * wa + to_float(v_b[base + i]) * wb;\n"
            "    if (i < head_dim) out[base + i] = from_float<T>(r);")),
    ]
