"""Rule logic that needs no GPU: preprocessing, directives, PTX audit, compile logs, launch bounds,
the physical floor and the every-call comparison."""

from __future__ import annotations

import pytest

from triforge.astra.candidate import Candidate, CandidateError, resolve_launch
from triforge.astra.compile import sanitize_log
from triforge.astra.preprocess import check_directives, clean, preprocess
from triforge.astra.ptx_audit import audit_ptx
from triforge.astra.task import get_task


def test_splicing_keeps_line_numbers_and_joins_tokens():
    text = clean("int a;\n__dev\\\nice__ int b;\nint c;\n")
    assert "__device__ int b;" in text
    assert text.split("\n").index("int c;") == 3  # the line of `int c` in the file (0-based)


@pytest.mark.parametrize("src,kept,gone", [
    ('const char* s = "/* not a comment"; int real; /* */', "int real", None),
    ("char c = '\"'; int real; // tail", "int real", "tail"),
    ('auto r = R"x(/* raw */)x"; int real;', "int real", None),
    ("a /* one\ntwo */ b", "b", "two"),
])
def test_comments_are_removed_knowing_literals(src, kept, gone):
    out = clean(src)
    assert kept in out
    if gone:
        assert gone not in out


def test_macros_expand_as_the_compiler_would():
    src = ("#define GLUE_(a, b) a##b\n#define GLUE(a, b) GLUE_(a, b)\n#define T clo\n#define K ck64\n"
           "#define STR(x) #x\nlong v = GLUE(T, K)();\nconst char* s = STR(globaltimer);\n"
           '#define PIECE "%%glob" "al"\nasm("mov.u64 %0, " PIECE "timer;");\n')
    out = preprocess(src)
    assert "clock64()" in out and '"globaltimer"' in out and '"mov.u64 %0, %%globaltimer;"' in out
    assert len(out.split("\n")) == len(src.split("\n"))


def test_a_macro_bomb_is_refused_not_expanded():
    src = "#define A0 x x\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 30)) + "A29;\n"
    assert "__macro_expansion_refused__" in preprocess(src)


@pytest.mark.parametrize("src,needle", [
    ("#include </etc/passwd>\n", "not on the allow list"),
    ('#define H "/etc/passwd"\n#include H\n', "literally"),
    ("%:include <cstdio>\n", "not on the allow list"),
    ("#inc\\\nlude <cstdio>\n", "not on the allow list"),
    ('#line 1 "candidate.cu"\n', "#line"),
    ("#if __has_include(</root/.ssh/id_rsa>)\n#endif\n", "__has_include"),
    ("#embed </etc/passwd>\n", "#embed"),
])
def test_directives_that_could_read_other_files_are_refused(src, needle):
    errors = check_directives(src)
    assert errors and any(needle in e.detail for e in errors), errors


def test_allowed_headers_and_ordinary_directives_pass():
    src = "#include <cuda_bf16.h>\n#include \"cuda_fp16.h\"\n#pragma unroll\n#ifndef X\n#define X 1\n#endif\n"
    assert check_directives(src) == []


def test_compile_log_quotes_only_the_candidate():
    log = ("/home/u/.ssh/id_rsa(1): error: expected a declaration\n  -----BEGIN OPENSSH PRIVATE KEY-----\n  ^\n\n"
           "candidate.cu(7): error: identifier \"oops\" is undefined\n    int x = oops;\n            ^\n\n"
           "2 errors detected in the compilation of \"candidate.cu\".")
    out = sanitize_log(log)
    assert "OPENSSH" not in out and "id_rsa" not in out
    assert "error in another file (its text is not shown)" in out
    assert "int x = oops;" in out and "2 errors detected" in out


def test_a_host_file_included_through_a_macro_never_reaches_the_compiler(tmp_path):
    pytest.importorskip("cuda.bindings.nvrtc")
    from triforge.astra.compile import nvrtc_compile

    secret = tmp_path / "secret.h"
    secret.write_text("THE-SECRET-LINE-42 is here\n")
    base = get_task("silu_and_mul").baseline_source()
    for spelling in (f'#include "{secret}"\n', f'#define P "{secret}"\n#include P\n'):
        res = nvrtc_compile(spelling + base, ["silu_and_mul_kernel<float>"], use_cache=False)
        assert not res.ok and "THE-SECRET" not in res.log and "refused" in res.log


def _ptx(body: str, decls: str = "") -> str:
    return (".version 8.0\n.target sm_90\n.address_size 64\n" + decls +
            ".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u32 k_param_1\n)\n{\n"
            "\t.reg .b64 %rd<20>;\n\t.reg .b32 %r<20>;\n\t.reg .f32 %f<9>;\n" + body + "\tret;\n}\n")


PARAM = "\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n"


@pytest.mark.parametrize("name,body,decls,rule", [
    ("timer", "\tmov.u64 %rd3, %globaltimer;\n", "", "ptx-special-register"),
    ("smid", "\tmov.u32 %r1, %smid;\n", "", "ptx-special-register"),
    ("launch", "\tcall.uni (retval0), cudaLaunchDeviceV2, (param0, param1);\n", "", "dynamic-launch"),
    ("malloc", "\tcall.uni (retval0), malloc, (param0);\n", "", "memory-api"),
    ("global-store", "\tst.global.u32 [counter], %r1;\n", ".global .align 4 .u32 counter;\n", "persistent-device-state"),
    ("global-atomic", "\tmov.u64 %rd3, counter;\n\tatom.global.add.u32 %r2, [%rd3+4], 1;\n",
     ".global .align 4 .b8 counter[8];\n", "persistent-device-state"),
    ("address-escapes", PARAM + "\tmov.u64 %rd3, counter;\n\tst.global.u64 [%rd2], %rd3;\n",
     ".global .align 8 .u64 counter;\n", "persistent-device-state"),
    ("constant-address", "\tmov.u64 %rd3, 140000000000000;\n\tld.global.f32 %f1, [%rd3];\n", "", "pointer-from-integer"),
    ("immediate-address", "\tld.f32 %f1, [4096];\n", "", "pointer-from-integer"),
    ("int-param-as-pointer", "\tld.param.u32 %r1, [k_param_1];\n\tcvt.u64.u32 %rd3, %r1;\n\tld.global.f32 %f1, [%rd3];\n", "",
     "pointer-from-integer"),
    ("laundered-through-local", "\tmov.u64 %rd3, 140000000000000;\n\tst.local.u64 [%SP+0], %rd3;\n"
     "\tld.local.u64 %rd4, [%SP+0];\n\tld.global.f32 %f1, [%rd4];\n", "", "pointer-from-integer"),
    ("managed", "", ".global .attribute(.managed) .align 4 .u32 m;\n", "managed-memory"),
])
def test_ptx_rules_fire(name, body, decls, rule):
    assert rule in {f.rule for f in audit_ptx(_ptx(body, decls))}


@pytest.mark.parametrize("name,body,decls", [
    ("param-pointer-arithmetic", PARAM + "\tmul.wide.s32 %rd3, %r1, 4;\n\tadd.s64 %rd4, %rd2, %rd3;\n"
     "\tld.global.nc.f32 %f1, [%rd4];\n\tst.global.f32 [%rd4+16], %f1;\n", ""),
    ("read-only-table", "\tmov.u64 %rd3, tbl;\n\tld.global.nc.f32 %f1, [%rd3+8];\n",
     ".global .align 4 .b8 tbl[16] = {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64};\n"),
    ("pointer-table-on-the-stack", PARAM + "\tst.local.u64 [%SP+0], %rd2;\n\tld.local.u64 %rd5, [%SP+0];\n"
     "\tld.global.f32 %f1, [%rd5];\n", ""),
    ("shared-memory", "\tmov.u32 %r2, smem;\n\tst.shared.f32 [%r2], %f1;\n", ".shared .align 4 .b8 smem[64];\n"),
    ("printf", "\tcall.uni (retval0), vprintf, (param0, param1);\n", ""),
])
def test_ptx_rules_stay_quiet_for_honest_code(name, body, decls):
    assert audit_ptx(_ptx(body, decls)) == []


def test_unaccounted_gmem_in_the_ptxas_report_is_state():
    found = audit_ptx(_ptx(""), ptxas_log="ptxas info    : 64 bytes gmem\n")
    assert [f.rule for f in found] == ["persistent-device-state"]


@pytest.mark.parametrize("line", [
    "// @launch grid: 999999999999999999999 * num_tokens",
    "// @launch grid: num_tokens" + " * num_tokens" * 40,
    "// @launch grid: (num_tokens, 70000)",
    "// @launch block: (32, 32, 128)",
    "// @launch grid: num_tokens // 0",
])
def test_launch_expressions_cannot_build_huge_values(line):
    with pytest.raises(CandidateError):
        cand = Candidate.from_source(line + "\n")
        resolve_launch(cand.launch_exprs, {"grid": "1", "block": "1"},
                       {"num_tokens": 4096 * 4096, "elem_size": 2, "vec": 8})


def test_the_physical_floor():
    from triforge.astra.timing import Device, floor_us

    dev = Device("x", peak_gbs=1000.0, l2_bytes=50_000_000, copy_gbs=800.0)
    assert floor_us(1_000_000_000, 0, dev) == pytest.approx(1000.0)
    # written bytes the L2 can absorb cost nothing inside the timed window; the rest reaches DRAM
    assert floor_us(0, 40_000_000, dev) == 0.0
    assert floor_us(0, 150_000_000, dev) == pytest.approx(100.0)


def test_io_bytes_counts_reads_and_writes_from_the_task():
    torch = pytest.importorskip("torch")
    from triforge.astra.timing import io_bytes

    t = get_task("fused_add_rmsnorm")
    s = {"num_tokens": 4, "hidden": 8}
    inputs = {"input": torch.zeros(4, 8, dtype=torch.bfloat16), "residual": torch.zeros(4, 8, dtype=torch.bfloat16)}
    read, written = io_bytes(t, s, "bf16", inputs)
    assert written == 2 * 4 * 8 * 2 and read == (2 * 4 * 8 + 8) * 2  # input, residual and weight read


def test_every_call_comparison_counts_elements_off_the_baseline():
    torch = pytest.importorskip("torch")
    from triforge.astra.timed_checks import CallChecker, violations

    t = get_task("silu_and_mul")
    want = torch.randn(64, 32).to(torch.bfloat16)
    assert int(violations(t, "out", want.clone(), want, "bf16")) == 0
    near = (want.float() * 1.004).to(torch.bfloat16)  # rounding-level differences stay inside the bound
    assert int(violations(t, "out", near, want, "bf16")) == 0
    stale = torch.randn(64, 32).to(torch.bfloat16)
    assert int(violations(t, "out", stale, want, "bf16")) > 1000
    nan = want.clone()
    nan[3, 3] = float("nan")
    assert int(violations(t, "out", nan, want, "bf16")) == 1
    chk = CallChecker(t, "bf16")
    for r, out in enumerate((want, stale)):
        chk(r, 0, {"out": out})
        chk(r, 1, {"out": want})
        chk(r, 2, {"out": want})
    assert chk.calls == 2 and [r for r, _ in chk.failures()] == [1]


def test_every_call_comparison_agrees_with_the_rule_element_by_element():
    """Per element: both NaN, or the same value (equal infinities), or both finite and within twice the
    tolerance (relative to the element, absolute to the largest finite reference) passes; anything else
    (NaN against a number, an infinity against anything else, a number against an infinity) is one
    violation. Checked on many mixtures of special values in either tensor."""
    torch = pytest.importorskip("torch")
    import math
    import random

    from triforge.astra.timed_checks import violations

    t = get_task("silu_and_mul")
    tol = t.tol("out", "fp32")
    specials = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, 3e38, -3e38, 1.0, -1.0]
    rnd = random.Random(7)
    for trial in range(300):
        n = rnd.choice([1, 2, 5, 33])
        want = [rnd.choice(specials) if rnd.random() < 0.4 else rnd.gauss(0, 10) for _ in range(n)]
        got = []
        for w in want:
            u = rnd.random()
            got.append(w if u < 0.3 else rnd.choice(specials) if u < 0.6
                       else w * (1 + rnd.choice([1e-7, 1e-3, 0.5])) if math.isfinite(w) else rnd.gauss(0, 10))
        got, want = torch.tensor(got).tolist(), torch.tensor(want).tolist()  # as float32 holds them
        finite = [abs(w) for w in want if math.isfinite(w)]
        scale = max(finite, default=0.0)
        expect = 0
        for g, w in zip(got, want, strict=True):
            if math.isnan(g) and math.isnan(w) or g == w:
                continue
            if math.isfinite(g) and math.isfinite(w):
                bound = 2 * (tol.abs_tol * scale + tol.rtol * abs(w)) + 1e-30
                if abs(g - w) <= bound * (1 + 1e-6) and abs(g - w) >= bound * (1 - 1e-6):
                    break  # on the bound itself float32 rounding decides; draw again
                if abs(g - w) <= bound:
                    continue
            expect += 1
        else:
            got_t, want_t = torch.tensor(got), torch.tensor(want)
            assert int(violations(t, "out", got_t, want_t, "fp32")) == expect, (trial, got, want)


def test_one_wrong_element_is_counted_in_a_tensor_past_two_to_the_24():
    """The timing shapes reach 45M elements: a count kept in float32 cannot tell 2^25 from 2^25 - 1, so one
    corrupted element there would pass. The count must be exact at any size."""
    torch = pytest.importorskip("torch")
    from triforge.astra.timed_checks import violations

    t = get_task("silu_and_mul")
    want = torch.ones((1 << 25) + 1, dtype=torch.bfloat16)
    got = want.clone()
    assert int(violations(t, "out", got, want, "bf16")) == 0
    got[12345] = 5.0
    assert int(violations(t, "out", got, want, "bf16")) == 1


def test_exact_outputs_and_fp8_codes_in_the_every_call_comparison():
    torch = pytest.importorskip("torch")
    from triforge.astra.timed_checks import violations

    fused = get_task("fused_add_rmsnorm")
    r = torch.randn(8, 8).to(torch.bfloat16)
    off = r.clone()
    off.view(torch.int16)[0, 0] += 1  # one unit in the last place
    assert int(violations(fused, "residual", r.clone(), r, "bf16")) == 0
    assert int(violations(fused, "residual", off, r, "bf16")) >= 1
    q = get_task("per_token_group_quant_fp8")
    codes = (torch.randn(64, 128) * 100).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
    assert int(violations(q, "out_q", codes.clone(), codes, "bf16")) == 0
    shuffled = codes[torch.randperm(64)]
    assert int(violations(q, "out_q", shuffled, codes, "bf16")) > 100


def test_large_shape_samples_rows_around_every_2_to_the_31_boundary():
    from triforge.astra.large import LIMIT, sample_rows

    per_token = 11008
    tokens = LIMIT // per_token + 2
    rows = sample_rows(tokens, per_token, seed=3)
    boundary = LIMIT // per_token
    assert {0, tokens - 1, boundary - 1, boundary, boundary + 1} <= set(rows)
    assert rows == sorted(set(rows)) and len(rows) >= 20
