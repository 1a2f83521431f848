"""The candidate format: one .cu file, the baseline's entry point and parameter list, optional launch lines.

A candidate declares its launch geometry in comment lines (otherwise the task's default applies):

    // @launch block: 256
    // @launch grid: (num_tokens, cdiv(d, 256))
    // @launch smem: 0

Each value is an expression over the shape's names (e.g. `num_tokens`, `d`), `elem_size` (bytes
per element of the dtype) and `vec` (elements per 16-byte access), with integers, + - * // %,
`cdiv`, `min`, `max` and tuples of up to three values.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from triforge.astra.preprocess import clean
from triforge.core import pyparse
from triforge.core.errors import UserError

_LAUNCH = re.compile(r"^\s*//\s*@launch\s+(block|grid|smem)\s*:\s*(.+?)\s*$", re.M)
_FUNCS = {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max}
MAX_EXPR_CHARS = 200
MAX_VALUE = 1 << 62  # every constant and intermediate value: no expression can build a huge integer
GRID_LIMITS = ((1 << 31) - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)


class CandidateError(Exception):
    """The candidate does not match the task's interface (reported as verdict compile_error)."""


@dataclass
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int


@dataclass
class Candidate:
    source: str
    launch_exprs: dict[str, str] = field(default_factory=dict)
    path: str | None = None

    @classmethod
    def from_source(cls, source: str, path: str | None = None) -> Candidate:
        exprs = {m.group(1): m.group(2) for m in _LAUNCH.finditer(source)}
        for key, expr in exprs.items():
            if len(expr) > MAX_EXPR_CHARS:
                raise CandidateError(f"@launch {key} expression is longer than {MAX_EXPR_CHARS} characters")
            try:
                _check_expr(pyparse.parse(expr, mode="eval").body)
            except (SyntaxError, ValueError) as exc:
                raise CandidateError(f"bad @launch {key} expression {expr!r}: {exc}") from None
        return cls(source=source, launch_exprs=exprs, path=path)


def _check_expr(node: ast.AST) -> None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        if abs(node.value) > MAX_VALUE:
            raise ValueError(f"constant {node.value} is too large")
        return
    if isinstance(node, ast.Name):
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.FloorDiv | ast.Mod):
        _check_expr(node.left)
        _check_expr(node.right)
        return
    if isinstance(node, ast.Tuple) and 1 <= len(node.elts) <= 3:
        for e in node.elts:
            _check_expr(e)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        for a in node.args:
            _check_expr(a)
        return
    raise ValueError(f"not allowed: {ast.dump(node)[:60]}")


def _eval(node: ast.AST, env: dict[str, int]):
    value = _eval_node(node, env)
    for v in value if isinstance(value, tuple) else (value,):
        if abs(v) > MAX_VALUE:
            raise CandidateError(f"@launch value {v} is out of range")
    return value


def _eval_node(node: ast.AST, env: dict[str, int]):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise CandidateError(f"@launch uses unknown name {node.id!r}; known: {', '.join(sorted(env))}")
        return env[node.id]
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env), _eval(node.right, env)
        if isinstance(a, tuple) or isinstance(b, tuple):
            raise CandidateError("@launch arithmetic on a tuple")
        if isinstance(node.op, ast.FloorDiv | ast.Mod) and b == 0:
            raise CandidateError("@launch divides by zero")
        ops = {ast.Add: a.__add__, ast.Sub: a.__sub__, ast.Mult: a.__mul__, ast.FloorDiv: a.__floordiv__, ast.Mod: a.__mod__}
        return ops[type(node.op)](b)
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, env) for e in node.elts)
    if isinstance(node, ast.Call):
        return _FUNCS[node.func.id](*[_eval(a, env) for a in node.args])  # type: ignore[union-attr]
    raise CandidateError("bad expression")


def eval_expr(expr: str, env: dict[str, int]) -> int | tuple[int, ...]:
    return _eval(pyparse.parse(expr, mode="eval").body, env)


def _dim3(value, what: str) -> tuple[int, int, int]:
    vals = tuple(value) if isinstance(value, tuple) else (value,)
    if not all(isinstance(v, int) and v >= 1 for v in vals):
        raise CandidateError(f"@launch {what} must be positive integers, got {value!r}")
    dims = (tuple(vals) + (1, 1))[:3]
    limits = GRID_LIMITS if what == "grid" else BLOCK_LIMITS
    if any(v > lim for v, lim in zip(dims, limits, strict=True)):
        raise CandidateError(f"@launch {what} {dims} exceeds the device limits {limits}")
    return dims  # type: ignore[return-value]


def resolve_launch(exprs: dict[str, str], default: dict[str, str], env: dict[str, int]) -> Launch:
    """Launch geometry for one problem: the candidate's own lines, else the task's default."""
    merged = {**default, **exprs} if exprs else dict(default)
    grid = _dim3(eval_expr(merged["grid"], env), "grid")
    block = _dim3(eval_expr(merged["block"], env), "block")
    smem = eval_expr(merged.get("smem", "0"), env)
    if block[0] * block[1] * block[2] > 1024:
        raise CandidateError(f"block {block} has more than 1024 threads")
    if not isinstance(smem, int) or smem < 0 or smem > 227 * 1024:
        raise CandidateError(f"smem {smem!r} out of range")
    return Launch(grid=grid, block=block, smem=smem)


def _strip_comments(src: str) -> str:
    return clean(src)


def kernel_params(source: str, entry: str) -> list[str]:
    """Normalized parameter types of `__global__ void entry(...)` (names, const, __restrict__ dropped)."""
    src = _strip_comments(source)
    m = re.search(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                  + re.escape(entry) + r"\s*\(", src)
    if not m:
        raise CandidateError(f"no `__global__ void {entry}(...)` found")
    depth, i = 1, m.end()
    while depth and i < len(src):
        depth += {"(": 1, ")": -1}.get(src[i], 0)
        i += 1
    body = src[m.end(): i - 1]
    out = []
    for raw in body.split(","):
        words = raw.replace("*", " * ").split()
        words = [w for w in words if w not in ("const", "__restrict__", "__restrict", "restrict", "volatile")]
        if not words:
            continue
        stars = words.count("*")
        words = [w for w in words if w != "*"]
        base = words[:-1] if len(words) > 1 else words
        out.append(" ".join(base) + "*" * stars)
    return out


def check_interface(source: str, baseline: str, entry: str) -> None:
    try:
        want = kernel_params(baseline, entry)
    except CandidateError as exc:
        raise UserError(f"task baseline broken: {exc}") from None
    got = kernel_params(source, entry)
    if got != want:
        raise CandidateError(f"parameter list of {entry} differs from the baseline: got ({', '.join(got)}), "
                             f"want ({', '.join(want)})")
    if not re.search(r"template\s*<\s*(typename|class)\s+\w+\s*>\s*(__launch_bounds__\s*\([^)]*\)\s*)?__global__",
                     _strip_comments(source)):
        raise CandidateError(f"{entry} must be a template over the element type (template <typename T> __global__ ...)")
