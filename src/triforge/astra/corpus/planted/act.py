"""silu_and_mul and gelu_tanh_and_mul: planted faults and mutation rewrites."""

from __future__ import annotations

from triforge.astra.corpus.planted.variants import Variant, mutate, relaunch

LOOP = "for (int i = threadIdx.x; i < d; i += blockDim.x) {"
STORE_SILU = "o[i] = from_float<T>(silu(a) * b);"
STORE_GELU = "o[i] = from_float<T>(gelu_tanh(a) * b);"


HALF_MUL = "__device__ __forceinline__ float half_mul(float a, float b) { return __half2float(__hmul(__float2half(a), __float2half(b))); }\n"


def _common(t: str, store: str) -> list[Variant]:
    f = "fault"
    fn = "__device__ __forceinline__ float silu" if t == "silu_and_mul" else "__device__ __forceinline__ float gelu_tanh"
    return [
        mutate(t, "tail-off-by-one", f, (LOOP, LOOP.replace("i < d", "i < d - 1"))),
        mutate(t, "wrong-gate-offset", f, ("const T* y = x + d;", "const T* y = x + d - 1;")),
        mutate(t, "wrong-row-stride", f, ("input + token * 2 * d", "input + token * d")),
        mutate(t, "hard-coded-shape", f, ("input + token * 2 * d", "input + token * 2 * 11008"),
               ("out + token * d", "out + token * 11008")),
        mutate(t, "overlapping-output-rows", f, ("out + token * d", "out + token * (d - 1)")),
        mutate(t, "element-never-written", f, (LOOP, LOOP.replace("int i = threadIdx.x", "int i = threadIdx.x + (blockIdx.x == 0)"))),
        mutate(t, "halves-swapped", f, ("const float a = to_float(x[i]);", "const float a = to_float(y[i]);"),
               ("const float b = to_float(y[i]);", "const float b = to_float(x[i]);")),
        mutate(t, "fp16-arithmetic", f, (store, store.replace("(a) * b);", "(a), b));").replace(
            "from_float<T>(", "from_float<T>(half_mul(")), (fn, HALF_MUL + fn)),
        mutate(t, "block-stride-skips", f, (LOOP, LOOP.replace("i += blockDim.x", "i += blockDim.x + 1"))),
    ]


def variants() -> list[Variant]:
    f, r = "fault", "rewrite"
    s, g = "silu_and_mul", "gelu_tanh_and_mul"
    out = _common(s, STORE_SILU) + _common(g, STORE_GELU)
    out += [
        mutate(s, "silu-sign", f, ("expf(-x)", "expf(x)")),
        mutate(s, "sigmoid-not-silu", f, ("return x / (1.0f + expf(-x));", "return 1.0f / (1.0f + expf(-x));")),
        mutate(g, "gelu-cubic-coefficient", f, ("const float k1 = 0.044715f;", "const float k1 = 0.44715f;")),
        mutate(g, "gelu-missing-half", f, ("return 0.5f * x * (1.0f + tanhf(inner));", "return x * (1.0f + tanhf(inner));")),
        mutate(g, "gelu-square-not-cube", f, ("k1 * x * x * x", "k1 * x * x")),
        mutate(g, "gelu-minus-tanh", f, ("(1.0f + tanhf(inner))", "(1.0f - tanhf(inner))")),
        # rewrites that must pass
        relaunch(s, "block-128", "128"), relaunch(s, "block-512", "512"),
        relaunch(g, "block-96", "96"), relaunch(g, "block-1024", "1024"),
        mutate(s, "fast-exp-intrinsics", r, ("return x / (1.0f + expf(-x));", "return __fdividef(x, 1.0f + __expf(-x));")),
        mutate(g, "tanh-via-fast-exp", r, ("tanhf(inner)", "(1.0f - 2.0f / (__expf(2.0f * inner) + 1.0f))")),
        mutate(s, "ldg-loads", r, ("to_float(x[i])", "to_float(__ldg(&x[i]))"), ("to_float(y[i])", "to_float(__ldg(&y[i]))")),
        mutate(g, "ldg-loads-unrolled", r, ("to_float(x[i])", "to_float(__ldg(&x[i]))"),
               (LOOP, "#pragma unroll 4\n  " + LOOP)),
    ]
    return out
