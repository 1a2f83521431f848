"""Anti-hack rules checked on the compiled PTX, which no spelling of the source can hide.

- `ptx-special-register`: timers and hardware identity (`%globaltimer`, `%clock64`, `%smid`, `%gridid`, ...).
- `dynamic-launch` / `memory-api`: calls to functions outside the module (device-side launches,
  parameter buffers, device `malloc`); only `vprintf` and `__assertfail` may be called.
- `persistent-device-state`: a store, atomic or reduction to a module-scope `.global` variable, or
  its address escaping into memory or a call (read-only tables, which the compiler loads with
  `ld.global.nc`, are fine).
- `pointer-from-integer`: a global or generic memory access whose address does not derive from a
  kernel parameter, a variable's address or the stack: a pointer made from a number.

The address analysis is a flow-insensitive data flow over virtual registers (PTX from NVVM keeps one
virtual register per value). A pointer laundered through local or shared memory counts as made from
a number as soon as any 64-bit value without pointer provenance is stored there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from triforge.astra.scan import Finding

SPECIAL_REGISTERS = re.compile(r"%(globaltimer(?:_lo|_hi)?|clock(?:64|_hi)?|smid|nsmid|gridid|pm\d(?:_64)?|envreg\d+)\b")
ALLOWED_EXTERN = frozenset({"vprintf", "__assertfail"})
_LAUNCH_NAMES = re.compile(r"cudaLaunch|cudaGetParameterBuffer|cudaCG|cudaStream|cudaGraph|cudaDevice")
_MEMORY_NAMES = re.compile(r"^(malloc|free|__nv_aligned_device_malloc|cudaMalloc|cudaFree|cudaMemcpy|cudaMemset)")
_GLOBAL_DECL = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.global\s+[^;]*?([A-Za-z_$][\w$]*)\s*(?:\[[^\]]*\])?\s*(?:=|;)", re.M)
_SYMBOL_DECL = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(shared|const|local)\s+[^;]*?([A-Za-z_$][\w$]*)\s*(?:\[[^\]]*\])?\s*(?:=|;)", re.M)
_FUNC = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)", re.M)
_REG = re.compile(r"%[A-Za-z_][\w$]*")
_WIDE = re.compile(r"\.[usb]64\b")
_MEMOP = re.compile(r"^(ld|st|atom|red|cp\.async|cp\.reduce\.async|prefetch|prefetchu|ldu|multimem)\b")


@dataclass
class _Fn:
    name: str
    kind: str  # entry | func
    body: str
    insts: list[tuple[str, list[str]]] = field(default_factory=list)


def _functions(ptx: str) -> list[_Fn]:
    fns = []
    for m in _FUNC.finditer(ptx):
        start = ptx.find("{", m.end())
        semi = ptx.find(";", m.end())
        if start < 0 or (0 <= semi < start):
            continue  # a declaration (prototype) only
        depth, i = 0, start
        while i < len(ptx):
            depth += {"{": 1, "}": -1}.get(ptx[i], 0)
            if depth == 0:
                break
            i += 1
        fns.append(_Fn(m.group(2), m.group(1), ptx[start + 1: i]))
    return fns


def _split_operands(text: str) -> list[str]:
    out, cur, depth = [], "", 0
    for ch in text:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _instructions(body: str) -> list[tuple[str, list[str]]]:
    body = re.sub(r"//[^\n]*", "", body)
    body = re.sub(r"^\s*\.(?:loc|file|section)\b[^\n]*", "", body, flags=re.M)  # debug line info has no ';'
    out = []
    for raw in body.split(";"):
        s = raw.strip()
        s = re.sub(r"^(?:[$\w]+:\s*)+", "", s)  # labels
        s = s.strip("{} \t\n")
        s = re.sub(r"^@!?%\w+\s+", "", s)  # predicate guard
        if not s or s.startswith("."):
            continue
        parts = s.split(None, 1)
        out.append((parts[0], _split_operands(parts[1]) if len(parts) > 1 else []))
    return out


def _regs(operand: str) -> list[str]:
    return _REG.findall(operand)


def _state(opcode: str) -> str:
    for st in ("global", "shared", "local", "param", "const"):
        if f".{st}" in opcode:
            return st
    return "generic"


def _address(opcode: str, ops: list[str]) -> str | None:
    """The bracketed address operand of a memory instruction (for cp.async: the global source)."""
    addrs = [o for o in ops if o.startswith("[")]
    if not addrs:
        return None
    if opcode.startswith(("cp.async", "cp.reduce.async")) and len(addrs) > 1:
        return addrs[1]
    return addrs[0]


def audit_ptx(ptx: str, ptxas_log: str = "") -> list[Finding]:
    """Every compiled-code rule the module breaks; empty when clean. `ptxas_log`: the `-v` report, whose
    `bytes gmem` must be accounted for by variables declared in the PTX."""
    found: list[Finding] = []
    if re.search(r"\.attribute\s*\(\s*\.managed", ptx):
        found.append(Finding("managed-memory", 0, "the compiled code declares managed memory"))
    gmem = sum(int(x) for x in re.findall(r"(\d+) bytes gmem", ptxas_log))
    if gmem and not _GLOBAL_DECL.search(ptx):
        found.append(Finding("persistent-device-state", 0, f"ptxas reports {gmem} bytes of global memory "
                                                          "that no variable in the PTX accounts for"))
    for m in SPECIAL_REGISTERS.finditer(ptx):
        found.append(Finding("ptx-special-register", 0, f"the compiled code reads %{m.group(1)}"))
    defined = {f.name for f in _functions(ptx)}
    for m in re.finditer(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([\w$]+)", ptx):
        name = m.group(1)
        if name in defined or name in ALLOWED_EXTERN:
            continue
        rule = "memory-api" if _MEMORY_NAMES.search(name) else "dynamic-launch"
        detail = "device-side launch or runtime call" if _LAUNCH_NAMES.search(name) or rule == "dynamic-launch" else "device heap"
        found.append(Finding(rule, 0, f"the compiled code calls {name} ({detail})"))
    globals_ = set(_GLOBAL_DECL.findall(ptx))
    symbols = globals_ | {m.group(2) for m in _SYMBOL_DECL.finditer(ptx)}
    fns = _functions(ptx)
    for f in fns:
        f.insts = _instructions(f.body)
    found += _dataflow(fns, globals_, symbols)
    uniq = {(f.rule, f.detail): f for f in found}
    return sorted(uniq.values(), key=lambda f: (f.rule, f.detail))


class _Flow:
    def __init__(self, globals_: set[str], symbols: set[str]) -> None:
        self.globals_, self.symbols = globals_, symbols
        self.ptr: set[str] = set()      # registers holding something derived from a real pointer
        self.gaddr: set[str] = set()    # registers derived from the address of a module-scope .global variable

    def has_ptr(self, fn: _Fn, operand: str) -> bool:
        return any(f"{fn.name}:{r}" in self.ptr or r in ("%SP", "%SPL") for r in _regs(operand)) or any(
            s in self.symbols for s in re.findall(r"[A-Za-z_$][\w$]*", operand))

    def has_gaddr(self, fn: _Fn, operand: str) -> bool:
        return any(f"{fn.name}:{r}" in self.gaddr for r in _regs(operand)) or any(
            s in self.globals_ for s in re.findall(r"[A-Za-z_$][\w$]*", operand))

    def propagate(self, fns: list[_Fn], laundered: dict[str, bool]) -> None:
        changed = True
        while changed:
            changed = False
            for fn in fns:
                for op, ops in fn.insts:
                    if not ops or op.startswith(("st", "red", "bra", "ret", "bar", "call", "prefetch", "setp", "cp.")):
                        continue
                    srcs = ops[1:]
                    if _MEMOP.match(op):
                        st = _state(op)
                        is_root = (st == "param" and _WIDE.search(op) is not None
                                   and (fn.kind == "entry" or not laundered["param"])) or (
                            st in ("local", "shared") and not laundered[st])
                        gp = False
                    else:
                        is_root = any(self.has_ptr(fn, s) for s in srcs)
                        gp = any(self.has_gaddr(fn, s) for s in srcs)
                    for d in _regs(ops[0]):
                        k = f"{fn.name}:{d}"
                        if is_root and k not in self.ptr:
                            self.ptr.add(k)
                            changed = True
                        if gp and k not in self.gaddr:
                            self.gaddr.add(k)
                            changed = True

    def laundering(self, fns: list[_Fn]) -> dict[str, bool]:
        """Spaces where some 64-bit value without pointer provenance is stored (a load there is no pointer root)."""
        out = {"local": False, "shared": False, "param": False}
        for fn in fns:
            for op, ops in fn.insts:
                if op.startswith("st") and _state(op) in out and len(ops) >= 2 and _WIDE.search(op):
                    if not self.has_ptr(fn, ops[1]):
                        out[_state(op)] = True
        return out


def _dataflow(fns: list[_Fn], globals_: set[str], symbols: set[str]) -> list[Finding]:
    laundered = {"local": False, "shared": False, "param": False}
    while True:
        flow = _Flow(globals_, symbols)
        flow.propagate(fns, laundered)
        now = {k: v or laundered[k] for k, v in flow.laundering(fns).items()}
        if now == laundered:
            break
        laundered = now
    has_ptr, has_gaddr = flow.has_ptr, flow.has_gaddr
    out: list[Finding] = []
    for fn in fns:
        for op, ops in fn.insts:
            if not _MEMOP.match(op) or op.startswith("prefetch"):
                continue
            st = _state(op)
            addr = _address(op, ops)
            if addr is None:
                continue
            writes = op.startswith(("st", "atom", "red", "cp.reduce.async", "multimem"))
            if writes and st in ("global", "generic") and has_gaddr(fn, addr):
                out.append(Finding("persistent-device-state", 0,
                                   f"{fn.name}: `{op}` writes a module-scope variable, state that outlives the launch"))
            values = [o for o in ops if not o.startswith("[")]
            if op.startswith(("st", "atom", "red")) and any(has_gaddr(fn, v) for v in (values[1:] if op.startswith("atom") else values)):
                out.append(Finding("persistent-device-state", 0,
                                   f"{fn.name}: the address of a module-scope variable is stored to memory"))
            if st in ("global", "generic") and not has_ptr(fn, addr):
                out.append(Finding("pointer-from-integer", 0,
                                   f"{fn.name}: `{op} {addr}` reads or writes memory at an address made from a number"))
        for op, ops in fn.insts:
            if op.startswith("st.param") and len(ops) >= 2 and has_gaddr(fn, ops[1]):
                out.append(Finding("persistent-device-state", 0,
                                   f"{fn.name}: the address of a module-scope variable is passed to a call"))
    return out
