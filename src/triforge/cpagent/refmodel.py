"""Static analysis of a reference model: where it solves, which model it solves, which expression each key prints.

The grader re-runs the reference up to (not including) its solve statement, then fixes each output key's
expression to the submitted value. Keys are read from the `solution = {...}` dict literal, whose values are
`E.value()` possibly wrapped in `.tolist()`, `int(...)`, `bool(...)` or `list(...)`; `E` is what gets fixed.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass

from triforge.core import pyparse
from triforge.cpagent.dataset import DatasetError, find_solution_dict

_WRAPPERS = {"int", "bool", "list", "float"}
_METHODS = {"tolist", "flatten", "value"}


@dataclass(frozen=True)
class CheckPlan:
    prefix: str  # source up to the solve statement
    model_name: str
    key_exprs: dict[str, str]  # output key -> source of the expression to fix
    casts: dict[str, str]  # output key -> "int"/"bool"/"float" when the print wraps the value in one


def _solve_statement(tree: ast.Module) -> tuple[int, str]:
    """Index of the last top-level statement calling `<name>.solve(...)`, and that name."""
    found: tuple[int, str] | None = None
    for i, stmt in enumerate(tree.body):
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "solve"
                and isinstance(node.func.value, ast.Name)
            ):
                found = (i, node.func.value.id)
    if found is None:
        raise DatasetError("no top-level `<model>.solve()` call found in the reference model")
    return found


def model_name(source: str) -> str:
    """The name whose `.solve()` the reference calls last at top level ('model' when none is found)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _solve_statement(pyparse.parse(source))[1]
    except (SyntaxError, DatasetError):
        return "model"


def _strip_value(node: ast.expr) -> tuple[ast.expr | None, str, bool]:
    """`int(x.value())`, `x.value().tolist()` ... -> (`x`, outermost scalar cast or '', whether a `.flatten()`
    was peeled); (None, '', False) when no `.value()` call was peeled."""
    peeled = flat = False
    cast = ""
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _WRAPPERS:
            if len(node.args) != 1 or node.keywords:
                return None, "", False
            if node.func.id != "list" and not cast:
                cast = node.func.id
            node = node.args[0]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _METHODS
            and not node.args
            and not node.keywords
        ):
            peeled = peeled or node.func.attr == "value"
            flat = flat or node.func.attr == "flatten"
            node = node.func.value
        else:
            return (node, cast, flat) if peeled else (None, "", False)


def _solution_dict(tree: ast.Module) -> ast.Dict:
    found = find_solution_dict(tree)
    if found is None:
        raise DatasetError("no `solution = {...}` dict literal in the reference model")
    _printed_as_is(tree, found)
    return found


def _printed_as_is(tree: ast.Module, literal: ast.Dict) -> None:
    """Raise unless the dict literal is what gets printed, unchanged: every `json.dumps` prints the literal or
    the one name bound to it, and nothing else assigns, updates or deletes under that name."""
    names = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and node.value is literal
             for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "json.dumps" and node.args:
            arg = node.args[0]
            if arg is not literal and not (isinstance(arg, ast.Name) and arg.id in names):
                raise DatasetError(f"prints `{ast.unparse(arg)[:60]}`, not the solution dict as built")
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign) and node.value is not literal:
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, ast.Delete) else [node.target]
        for t in targets:
            base = t.value if isinstance(t, ast.Subscript) else t
            if isinstance(base, ast.Name) and base.id in names:
                raise DatasetError(f"changes `{base.id}` after building it")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                and node.func.value.id in names and node.func.attr in ("update", "pop", "setdefault", "clear")):
            raise DatasetError(f"changes `{node.func.value.id}` after building it")


def check_plan(source: str, keys: tuple[str, ...] | list[str] | None = None) -> CheckPlan:
    """Split `source` (a reference with its instance data already substituted) for fix-and-solve.

    Raises DatasetError when some printed key's expression cannot be read (or, given the problem's output
    `keys`, when the dict literal does not print exactly those)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LaTeX like \( in the docstrings is an invalid escape
        tree = pyparse.parse(source)
    index, model_name = _solve_statement(tree)
    lines = source.splitlines(keepends=True)
    prefix = "".join(lines[: tree.body[index].lineno - 1])
    exprs: dict[str, str] = {}
    casts: dict[str, str] = {}
    sol = _solution_dict(tree)
    for k, v in zip(sol.keys, sol.values, strict=True):
        key = k.value if isinstance(k, ast.Constant) else None
        inner, cast, flat = _strip_value(v)
        if not isinstance(key, str) or inner is None:
            raise DatasetError(f"solution key {ast.unparse(k) if k else '**'}: cannot tell which expression "
                               f"`{ast.unparse(v)}` prints (expected `<expr>.value()`)")
        # A flattened print fixes the flattened expression (the harness reads it as an object array).
        exprs[key] = f"__import__('numpy').asarray({ast.unparse(inner)}, dtype=object).reshape(-1)" if flat \
            else ast.unparse(inner)
        if cast:
            casts[key] = cast
    if not exprs or (keys is not None and set(exprs) != set(keys)):
        raise DatasetError("the solution dict literal does not hold every printed key")
    return CheckPlan(prefix=prefix, model_name=model_name, key_exprs=exprs, casts=casts)
