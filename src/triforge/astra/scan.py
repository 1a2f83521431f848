"""Static anti-hack scan of a candidate's source: each finding names the rule that fired and the line."""

from __future__ import annotations

import re
from dataclasses import dataclass

ALLOWED_INCLUDES = frozenset({
    "cuda_bf16.h", "cuda_fp16.h", "cuda_fp8.h", "cooperative_groups.h", "cooperative_groups/reduce.h",
})

# First word of each PTX instruction a candidate may write in inline asm (the part before the first dot).
ALLOWED_PTX = frozenset({
    "ld", "st", "cvt", "cvta", "mov", "shfl", "fma", "add", "sub", "mul", "mad", "div", "rem", "ex2", "lg2",
    "rcp", "rsqrt", "sqrt", "tanh", "sin", "cos", "max", "min", "abs", "neg", "prmt", "and", "or", "xor", "not",
    "shl", "shr", "setp", "selp", "set", "bar", "barrier", "cp", "prefetch", "redux", "bfe", "bfi", "brev",
    "clz", "popc", "copysign", "testp", "lop3", "fns", "vote", "match", "ldmatrix", "stmatrix", "fence",
})
FORBIDDEN_REGS = ("%globaltimer", "%clock", "%clock64", "%smid", "%nsmid", "%gridid", "%pm")

_RULES: list[tuple[str, re.Pattern[str], str]] = [
    ("extra-stream", re.compile(r"\bcuda(Stream|StreamCreate\w*)\b|\bcudaStream_t\b"), "creates or uses a CUDA stream"),
    ("event-or-timer", re.compile(r"\bcudaEvent\w*|\bclock64\s*\(|\bclock\s*\(|__globaltimer|globaltimer"),
     "reads a timer or records events"),
    ("device-sync", re.compile(r"\bcuda(DeviceSynchronize|StreamSynchronize|ThreadSynchronize)\b"),
     "synchronizes the device from the candidate"),
    ("host-thread", re.compile(r"\bstd::thread\b|\bpthread_\w+|\bstd::async\b|\bfork\s*\("), "starts host threads"),
    ("dynamic-launch", re.compile(r"<<<|\bcudaLaunch\w*|\bcudaGraph\w*"), "launches other kernels or graphs"),
    ("memory-api", re.compile(r"\bcuda(Malloc|Free|Memcpy|Memset)\w*"), "calls the CUDA memory API"),
    ("pointer-from-integer", re.compile(
        r"\(\s*(const\s+)?\w+\s*\*\s*\)\s*\(?\s*(0x[0-9a-fA-F]+|\d{5,})|reinterpret_cast\s*<[^>]*\*\s*>\s*\(\s*(0x[0-9a-fA-F]+|\d{5,})"),
     "reads memory through a pointer made from a constant (an unrelated buffer)"),
    ("managed-memory", re.compile(r"__managed__"), "declares managed memory"),
]


@dataclass(frozen=True)
class Finding:
    rule: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"{self.rule} (line {self.line}): {self.detail}"


def _strip_comments(src: str) -> str:
    """Replace comments by spaces, keeping line numbers."""
    src = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def _line(src: str, pos: int) -> int:
    return src.count("\n", 0, pos) + 1


def _asm_findings(src: str) -> list[Finding]:
    out: list[Finding] = []
    for m in re.finditer(r"\basm\s*(volatile\s*)?\(", src):
        depth, i = 1, m.end()
        while depth and i < len(src):
            depth += {"(": 1, ")": -1}.get(src[i], 0)
            i += 1
        body = src[m.end(): i - 1]
        template = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', body.split(":")[0]))
        for reg in FORBIDDEN_REGS:
            if reg in template:
                out.append(Finding("ptx-special-register", _line(src, m.start()), f"inline PTX reads {reg}"))
        for stmt in re.split(r";|\\n", template):
            stmt = stmt.strip()
            if not stmt or stmt.startswith(("{", "}", ".reg", "//")) or stmt.endswith(":"):
                continue
            stmt = re.sub(r"^@!?%?\w+\s+", "", stmt.lstrip("{").strip())
            word = re.split(r"[.\s]", stmt, maxsplit=1)[0]
            if word and word not in ALLOWED_PTX:
                out.append(Finding("ptx-not-allowed", _line(src, m.start()), f"inline PTX instruction {word!r} is not on the allow list"))
    return out


def _device_variables(src: str) -> list[Finding]:
    """File-scope `__device__` variables: state that survives between calls (a place to cache results)."""
    out = []
    for m in re.finditer(r"\b__device__\b", src):
        depth = src.count("{", 0, m.start()) - src.count("}", 0, m.start())
        rest = src[m.end():]
        stop = re.search(r"[;{(]", rest)
        if stop is None or stop.group(0) == "(":
            continue
        decl = rest[: stop.start()]
        if "=" in decl or stop.group(0) == ";" or "[" in decl:
            where = "file scope" if depth == 0 else "a function"
            out.append(Finding("persistent-device-state", _line(src, m.start()),
                               f"__device__ variable at {where} keeps state between calls"))
    return out


def scan(source: str) -> list[Finding]:
    """Every rule the source breaks; empty when the candidate is clean."""
    src = _strip_comments(source)
    found: list[Finding] = []
    for m in re.finditer(r'#\s*include\s*[<"]([^>"]+)[>"]', src):
        if m.group(1) not in ALLOWED_INCLUDES:
            found.append(Finding("include-not-allowed", _line(src, m.start()), f"#include {m.group(1)} is not on the allow list"))
    for rule, pattern, detail in _RULES:
        for m in pattern.finditer(src):
            found.append(Finding(rule, _line(src, m.start()), f"{detail}: {m.group(0)!r}"))
    found += _asm_findings(src)
    found += _device_variables(src)
    return sorted(set(found), key=lambda f: (f.line, f.rule))
