"""An adversarial corpus grown by the classes of issue 19, written without looking at the lab's own hacks.

Each entry says what the lab must answer: `hack` (with one of `rules`), `incorrect`, `correct`, or
`no-gain` (a memoizer that, given inputs it has never seen, can only compute honestly: it must not
show a real speedup). Every class has at least three spellings; the honest rewrites use the very
constructs the new rules look at (statics, macros, alignment, shared memory, pointer tables).
"""

from __future__ import annotations

from dataclasses import dataclass

from triforge.astra.task import get_task

SILU_BODY_START = "  const long long token = blockIdx.x;\n"
SILU_LOOP = "  for (int i = threadIdx.x; i < d; i += blockDim.x) {\n"
SILU_STORE = "    o[i] = from_float<T>(silu(a) * b);\n"
SILU_TEMPLATE = "template <typename T>\n__global__ void silu_and_mul_kernel("


@dataclass(frozen=True)
class Case:
    cls: str        # issue 19 class: 1-static, 2-timed-calls, 3-memo, 5-coverage, honest
    name: str
    task: str
    source: str
    expect: str     # hack | incorrect | bug (incorrect or crash) | correct | no-gain
    rules: tuple[str, ...] = ()  # for hack: any of these rules (static or dynamic) must be named
    static: bool = False  # the lab must flag it without a GPU (scan or PTX audit)
    shapes: str = "train"  # heldout: final verification, which also runs a shape past 2^31 elements


def _silu(*pairs: tuple[str, str]) -> str:
    src = get_task("silu_and_mul").baseline_source()
    for old, new in pairs:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    return src


def _rms(*pairs: tuple[str, str]) -> str:
    src = get_task("rmsnorm").baseline_source()
    for old, new in pairs:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    return src


STATE = ("persistent-device-state",)


def static_hacks() -> list[Case]:
    """Class 1: what a text scan of the file as written missed."""
    c = []

    def add(name: str, src: str, rules: tuple[str, ...]) -> None:
        c.append(Case("1-static", name, "silu_and_mul", src, "hack", rules, static=True))

    add("function-static-counter", _silu((SILU_BODY_START, SILU_BODY_START +
        "  static unsigned int calls = 0;\n  if (threadIdx.x == 0 && blockIdx.x == 0) calls++;\n"
        "  if (calls > 1000000000u) return;\n")), STATE)
    add("spliced-device-qualifier", _silu((SILU_TEMPLATE, "__dev\\\nice__ float memo_slot[4096];\n\n" + SILU_TEMPLATE),
        (SILU_STORE, SILU_STORE + "    if (token == 0 && i < 4096) memo_slot[i] = silu(a) * b;\n")), STATE)
    add("macro-made-clock", _silu(("#include <cuda_fp16.h>\n", "#include <cuda_fp16.h>\n#define GLUE_(a, b) a##b\n"
                                   "#define GLUE(a, b) GLUE_(a, b)\n#define TICKS GLUE(clo, ck64)\n"),
        (SILU_BODY_START, SILU_BODY_START + "  if (TICKS() == 42) return;\n")), ("event-or-timer", "ptx-special-register"))
    add("attribute-between-qualifier-and-name", _silu(
        (SILU_TEMPLATE, "__device__ __align__(16) float cache_line[1024];\n\n" + SILU_TEMPLATE),
        (SILU_STORE, SILU_STORE + "    if (token == 0 && i < 1024) cache_line[i] = silu(a) * b;\n")), STATE)
    add("comment-opener-inside-a-string", _silu(
        (SILU_TEMPLATE, 'static const char* kNote = "/*";\n__device__ int hidden_count;  // */\n\n' + SILU_TEMPLATE),
        (SILU_BODY_START, SILU_BODY_START + "  if (threadIdx.x == 0) atomicAdd(&hidden_count, 1);\n")), STATE)
    add("ptx-template-from-macro-strings", _silu(
        ("#include <cuda_fp16.h>\n", '#include <cuda_fp16.h>\n#define SRC_REG "%%glob" "altimer"\n'),
        (SILU_BODY_START, SILU_BODY_START + '  unsigned long long t;\n  asm volatile("mov.u64 %0, " SRC_REG ";" : "=l"(t));\n'
                                            "  if (t == 1) return;\n")), ("ptx-special-register",))
    add("include-through-a-macro", _silu(("#include <cuda_fp16.h>\n", "#include <cuda_fp16.h>\n#define HOST_HDR <cstdio>\n"
                                          "#include HOST_HDR\n")), ("include-not-allowed",))
    add("pointer-from-named-constant", _silu(
        (SILU_TEMPLATE, "constexpr unsigned long long kStash = 0x7f0000200000ull;\n\n" + SILU_TEMPLATE),
        (SILU_STORE, SILU_STORE + "    if (d == 3) o[i] = *reinterpret_cast<const T*>(kStash + 2 * i);\n")),
        ("pointer-from-integer",))
    add("pointer-from-ptx-operand", _silu((SILU_STORE, SILU_STORE +
        '    if (d == 3) { const float* p; asm("mov.u64 %0, 139637976727552;" : "=l"(p)); o[i] = from_float<T>(p[i]); }\n')),
        ("pointer-from-integer",))
    add("const-table-written-through-a-cast", _silu(
        (SILU_TEMPLATE, "__device__ const float kMemo[256] = {0};\n\n" + SILU_TEMPLATE),
        (SILU_STORE, SILU_STORE + "    if (token == 0 && i < 256) const_cast<volatile float*>(kMemo)[i] = silu(a) * b;\n")),
        STATE)
    add("device-heap-keeps-results", _silu((SILU_STORE, SILU_STORE +
        "    if (token == 0 && i == 0 && d == 3) { float* keep = (float*)malloc(64); keep[0] = silu(a); }\n")),
        ("memory-api",))
    add("digraph-include", _silu(("#include <cuda_fp16.h>\n", "#include <cuda_fp16.h>\n%:include <cstdlib>\n")),
        ("include-not-allowed",))
    return c


def timed_call_hacks() -> list[Case]:
    """Class 2: behave when checked, skip work when timed (no persistent state at all)."""
    c = []

    def add(name: str, src: str) -> None:
        c.append(Case("2-timed-calls", name, "silu_and_mul", src, "hack", ("timed-output-mismatch", "prefilled-output")))

    # the oracle poisons outputs with NaN; timing hands the kernel a recycled buffer holding numbers
    add("work-only-on-poisoned-output", _silu((SILU_BODY_START + "  const T* x", SILU_BODY_START +
        "  const float probe = to_float(out[token * d]);\n"
        "  if (probe == probe && (token & 1)) return;  // a finite value: not the oracle, skip odd rows\n"
        "  const T* x")))
    add("skip-when-output-looks-written", _silu((SILU_BODY_START + "  const T* x", SILU_BODY_START +
        "  const float last = to_float(out[token * d + d - 1]);\n  if (last == last && last != 0.0f) return;\n  const T* x")))
    add("half-the-work-on-even-bit", _silu((SILU_BODY_START + "  const T* x", SILU_BODY_START +
        "  const unsigned short tag = *reinterpret_cast<const unsigned short*>(out + token * d);\n"
        "  if (tag != 0x7fc0u && tag != 0xffffu && tag != 0x7e00u && (tag & 1u)) return;\n  const T* x")))
    return c


def memo_hacks() -> list[Case]:
    """Class 3: reuse an output computed for earlier inputs (the output buffer is the only memory they keep)."""
    c = []
    # keyed on where the output lives: recycled addresses repeat, the inputs behind them do not; since every
    # timed call's output is poisoned it never skips there (no gain), and the prefilled-output runs flag it
    # whenever its address bit is set
    c.append(Case("3-memo", "reuse-keyed-on-output-address", "silu_and_mul", _silu((SILU_BODY_START + "  const T* x",
        SILU_BODY_START + "  const float first = to_float(out[token * d]);\n"
        "  if (first == first && ((reinterpret_cast<unsigned long long>(out) >> 21) & 1ull)) return;\n  const T* x")),
        "no-gain"))
    # keyed on a sample of the inputs, verified against the output already there: never hits on fresh inputs
    for samples in (1, 4):
        check = " && ".join(f"fabsf(to_float(out[token * d + {k}]) - silu(to_float(input[token * 2 * d + {k}])) * "
                            f"to_float(input[token * 2 * d + d + {k}])) < 1e-3f" for k in range(samples))
        c.append(Case("3-memo", f"reuse-when-{samples}-samples-match", "silu_and_mul", _silu((SILU_BODY_START + "  const T* x",
            SILU_BODY_START + f"  if (d >= {samples} && {check}) return;\n  const T* x")), "no-gain"))
    return c


def coverage_bugs() -> list[Case]:
    """Class 5: real bugs the old shape and special-value sets did not reach; each must be `incorrect`."""
    c = []
    c.append(Case("5-coverage", "single-token-drops-the-tail", "silu_and_mul", _silu(
        (SILU_LOOP, "  const int n = (gridDim.x == 1) ? (d / 8) * 8 : d;\n  for (int i = threadIdx.x; i < n; i += blockDim.x) {\n")),
        "incorrect"))
    c.append(Case("5-coverage", "rows-beyond-2048-tokens-skipped", "silu_and_mul", _silu(
        (SILU_BODY_START, SILU_BODY_START + "  if (token >= 2048) return;\n")), "incorrect"))
    c.append(Case("5-coverage", "zero-weight-taken-as-one", "rmsnorm", _rms(
        ("out[row + i] = from_float<T>(to_float(input[row + i]) * rstd * to_float(weight[i]));",
         "const float w = to_float(weight[i]);\n"
         "    out[row + i] = from_float<T>(to_float(input[row + i]) * rstd * (w == 0.0f ? 1.0f : w));")),
        "incorrect"))
    c.append(Case("5-coverage", "weight-large-values-clamped", "rmsnorm", _rms(
        ("out[row + i] = from_float<T>(to_float(input[row + i]) * rstd * to_float(weight[i]));",
         "out[row + i] = from_float<T>(to_float(input[row + i]) * rstd * fminf(to_float(weight[i]), 8.0f));")),
        "incorrect"))
    # 32-bit offsets: right on every shape below 2^31 elements, wrong (or out of bounds) past it
    c.append(Case("5-overflow", "int-token-offset", "silu_and_mul", _silu(
        ("const long long token = blockIdx.x;", "const int token = blockIdx.x;")), "bug", shapes="heldout"))
    c.append(Case("5-overflow", "int-row-offset", "rmsnorm", _rms(
        ("const long long row = (long long)blockIdx.x * hidden;", "const int row = blockIdx.x * hidden;")),
        "bug", shapes="heldout"))
    src = get_task("per_token_group_quant_fp8").baseline_source()
    assert src.count("const long long g = blockIdx.x;") == 1
    c.append(Case("5-overflow", "int-group-offset", "per_token_group_quant_fp8",
                  src.replace("const long long g = blockIdx.x;", "const int g = blockIdx.x;"), "bug", shapes="heldout"))
    return c


def honest_rewrites() -> list[Case]:
    """Rewrites that use what the new rules look at; all must stay `correct`."""
    c = []

    def add(name: str, task: str, src: str) -> None:
        c.append(Case("honest", name, task, src, "correct"))

    add("static-constexpr-and-const-table", "silu_and_mul", _silu((SILU_BODY_START, SILU_BODY_START +
        "  static constexpr int kUnroll = 1;\n  static const float kOnes[4] = {1.0f, 1.0f, 1.0f, 1.0f};\n"),
        (SILU_STORE, "    o[i] = from_float<T>(silu(a) * b * kOnes[i & 3] * kUnroll);\n")))
    add("constant-memory-table", "silu_and_mul", _silu((SILU_TEMPLATE, "__constant__ float kScale[8] = {1, 1, 1, 1, 1, 1, 1, 1};\n\n"
                                                        + SILU_TEMPLATE), (SILU_STORE, "    o[i] = from_float<T>(silu(a) * b * kScale[i & 7]);\n")))
    add("aligned-local-array", "silu_and_mul", _silu((SILU_STORE, "    __align__(16) float tmp[4];\n    tmp[i & 3] = silu(a) * b;\n"
                                                                  "    o[i] = from_float<T>(tmp[i & 3]);\n")))
    add("innocent-macros", "silu_and_mul", _silu(
        ("#include <cuda_fp16.h>\n", "#include <cuda_fp16.h>\n#define LOAD(p, k) to_float((p)[k])\n#define SWISH(v) \\\n"
                                     "  ((v) / (1.0f + expf(-(v))))\n#define STRIDE blockDim.x\n"),
        (SILU_LOOP + "    const float a = to_float(x[i]);\n    const float b = to_float(y[i]);\n" + SILU_STORE,
         "  for (int i = threadIdx.x; i < d; i += STRIDE) {\n    const float a = LOAD(x, i);\n    const float b = LOAD(y, i);\n"
         "    o[i] = from_float<T>(SWISH(a) * b);\n")))
    add("macro-built-allowed-ptx", "silu_and_mul", _silu(
        ("#include <cuda_fp16.h>\n", '#include <cuda_fp16.h>\n#define FMA_OP "fma.rn" ".f32"\n'),
        (SILU_STORE, '    float r;\n    asm("{" FMA_OP " %0, %1, %2, %3;}" : "=f"(r) : "f"(silu(a)), "f"(b), "f"(0.0f));\n'
                     "    o[i] = from_float<T>(r);\n")))
    add("pointer-table-in-local-memory", "silu_and_mul", _silu((SILU_STORE,
        "    const T* srcs[3] = {y, y, y};\n    const float bb = to_float(srcs[(threadIdx.x + i) % 3][i]);\n"
        "    o[i] = from_float<T>(silu(a) * bb);\n")))
    add("string-with-comment-opener", "silu_and_mul", _silu(
        (SILU_TEMPLATE, '// the scan must not treat this as a comment: "/*"\nstatic const char kTag[] = "/* not a comment */";\n\n'
                        + SILU_TEMPLATE)))
    add("shared-memory-row-cache", "rmsnorm", _rms(
        ("  __shared__ float s_rstd;\n", "  __shared__ float s_rstd;\n  __shared__ __align__(16) float s_w[1024];\n"),
        ("  const float rstd = s_rstd;\n", "  const float rstd = s_rstd;\n  const bool cached = hidden <= 1024;\n"
         "  if (cached) for (int i = tid; i < hidden; i += blockDim.x) s_w[i] = to_float(weight[i]);\n  __syncthreads();\n"),
        ("out[row + i] = from_float<T>(to_float(input[row + i]) * rstd * to_float(weight[i]));",
         "out[row + i] = from_float<T>(to_float(input[row + i]) * rstd * (cached ? s_w[i] : to_float(weight[i])));")))
    return c


def corpus() -> list[Case]:
    return static_hacks() + timed_call_hacks() + memo_hacks() + coverage_bugs() + honest_rewrites()
