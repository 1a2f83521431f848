"""Static anti-hack scan of what the compiler sees of a candidate (lines spliced, comments gone, the
candidate's macros expanded): each finding names the rule that fired and the line.

This is the fast first filter; `ptx_audit` checks the compiled code, which no spelling can hide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from triforge.astra.preprocess import ALLOWED_INCLUDES, check_directives, preprocess

__all__ = ["ALLOWED_INCLUDES", "Finding", "scan"]

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


_ATTRIBUTES = re.compile(r"__align__\s*\([^()]*\)|alignas\s*\([^()]*\)|__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)"
                         r"|\[\[[^\]]*\]\]")
_STATE_FREE = re.compile(r"\b(const|constexpr|__constant__|__shared__|__restrict__|typedef|using|extern\s+__shared__)\b")


def _device_variables(src: str) -> list[Finding]:
    """Variables that outlive a launch: `__device__` ones at any scope and `static` ones in device code
    (a function-scope `static` lives in global memory). Constants and `__shared__` arrays are fine."""
    text = _ATTRIBUTES.sub(lambda m: " " * len(m.group(0)), src)
    out = []
    for m in re.finditer(r"\b(__device__|static)\b", text):
        rest = text[m.end():]
        stop = re.search(r"[;{(=\[]", rest)
        if stop is None or stop.group(0) in "({":
            continue  # a function (or a class) and not a variable
        decl = text[max(text.rfind(";", 0, m.start()), text.rfind("{", 0, m.start()), text.rfind("}", 0, m.start())) + 1:
                    m.end() + stop.start()]
        if _STATE_FREE.search(decl) or re.search(r"\b(class|struct|template|operator|namespace)\b", decl):
            continue
        depth = text.count("{", 0, m.start()) - text.count("}", 0, m.start())
        if m.group(1) == "static" and depth == 0 and "__device__" not in decl:
            continue  # a host-side static at file scope never reaches the device
        where = "file scope" if depth == 0 else "a function"
        out.append(Finding("persistent-device-state", _line(text, m.start()),
                           f"{m.group(1)} variable at {where} keeps state between calls: {' '.join(decl.split())[:80]!r}"))
    return out


def scan(source: str) -> list[Finding]:
    """Every rule the source breaks; empty when the candidate is clean."""
    found: list[Finding] = []
    for e in check_directives(source):
        rule = "include-not-allowed" if "include" in e.detail else "directive-not-allowed"
        found.append(Finding(rule, e.line, e.detail))
    src = preprocess(source)
    if "__macro_expansion_refused__" in src:
        found.append(Finding("macro-expansion", _line(src, src.index("__macro_expansion_refused__")),
                             "a macro expands to more text than a kernel needs"))
    for rule, pattern, detail in _RULES:
        for m in pattern.finditer(src):
            found.append(Finding(rule, _line(src, m.start()), f"{detail}: {m.group(0)!r}"))
    found += _asm_findings(src)
    found += _device_variables(src)
    return sorted(set(found), key=lambda f: (f.line, f.rule))
