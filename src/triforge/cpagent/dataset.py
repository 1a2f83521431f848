"""CP-Bench data set loader for the upstream DCP-Bench-Open layout.

Layout read (never a list of ids): `<root>/dataset/<id>/<id>.cpmpy.py` and `<root>/dataset/<id>/<id>.json`.
The model file starts with `# Category:`, `# Source:` and optionally `# Timeout:` headers, then a docstring
(the problem text), then an optional `# Data` ... `# End of data` block (the default instance), then a
reference CPMpy model that prints one JSON object. The `.json` file is a list of instances (the first is
the default); problems without a data block have an empty list and a single implicit instance.

Where the data is comes from `triforge.data.resolve_path`: a set's name (the bundled `dcp-bench-open`, the
default, or one fetched), else a path to a checkout of the repository, its `dataset/` folder, or a zip of the
repository (the bundled set is one; so is GitHub's archive, whose files sit under one top folder).
"""

from __future__ import annotations

import ast
import difflib
import io
import json
import re
import warnings
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from triforge.core import pyparse
from triforge.core.errors import UserError
from triforge.cpagent.data_block import assignment

DEFAULT_TIMEOUT_S = 60.0
MODEL_SUFFIX = ".cpmpy.py"
_HEADER = re.compile(r"^#\s*(Category|Source|Timeout)\s*:\s*(.*?)\s*$", re.MULTILINE)
_DATA_START = "# Data"
_DATA_END = "# End of data"
Folder = Path | zipfile.Path  # a problem folder on disk or inside a zip


class DatasetError(UserError):
    """A data folder or problem file that is not in the DCP-Bench-Open layout."""


@dataclass(frozen=True)
class Problem:
    id: str
    category: str
    source: str
    timeout_s: float | None  # from `# Timeout:`; None when the header is absent
    description: str
    default_data: str  # text between `# Data` and `# End of data` ('' when there is no block)
    instances: tuple[dict[str, Any], ...]  # from <id>.json; may be empty
    reference_source: str
    output_keys: tuple[str, ...]
    is_optimization: bool
    objective_sense: str | None  # "minimize", "maximize" or None
    path: Path = field(compare=False)

    @property
    def time_limit_s(self) -> float:
        return self.timeout_s if self.timeout_s is not None else DEFAULT_TIMEOUT_S

    @property
    def n_instances(self) -> int:
        """At least 1: a problem without instances has its default instance only."""
        return max(1, len(self.instances))

    def instance_source(self, index: int = 0) -> str:
        """The reference model with instance `index` substituted for the default data block."""
        if not 0 <= index < self.n_instances:
            raise UserError(f"{self.id}: instance {index} out of range (it has {self.n_instances})")
        if not self.instances:
            return self.reference_source
        return substitute_data(self.reference_source, self.instances[index], where=str(self.path))


def _data_spans(source: str) -> list[tuple[int, int]]:
    """Character spans of the bodies of every data block (between the marker lines), in order."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    pos = 0
    for line in source.splitlines(keepends=True):
        stripped = line.strip()
        if start is None and stripped == _DATA_START:
            start = pos + len(line)
        elif start is not None and stripped == _DATA_END:
            spans.append((start, pos))
            start = None
        pos += len(line)
    if start is not None:
        raise DatasetError("has '# Data' but no '# End of data' line")
    return spans


def _data_span(source: str) -> tuple[int, int] | None:
    """Character span of the first data block's body, or None."""
    spans = _data_spans(source)
    return spans[0] if spans else None


def _substitute_block(body: str, instance: dict[str, Any], todo: set[str], where: str) -> str:
    """The block with the first assignment of each name in `todo` replaced by the instance's value; every
    other line stays. Removes the names it placed from `todo`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = pyparse.parse(body)
    except SyntaxError as e:
        raise DatasetError(f"{where}: cannot put the instance's data in: its data block is not valid Python "
                           f"({e.msg}, line {e.lineno} of the block)") from None
    lines = body.splitlines(keepends=True)
    groups: list[list[ast.stmt]] = []  # statements sharing lines (`a = 1; b = 2`) are rewritten together
    for stmt in tree.body:
        if groups and stmt.lineno <= (groups[-1][-1].end_lineno or groups[-1][-1].lineno):
            groups[-1].append(stmt)
        else:
            groups.append([stmt])
    out: list[str] = []
    line = 1
    for group in groups:
        first, last = group[0].lineno, group[-1].end_lineno or group[-1].lineno
        out += lines[line - 1 : first - 1]
        texts: list[str] = []
        changed = False
        for stmt in group:
            names = (assignment(stmt) or ([], None))[0]
            mine = [n for n in names if n in todo]
            if not mine:
                texts.append(ast.unparse(stmt))
                continue
            if len(mine) != len(names):
                raise DatasetError(f"{where}: cannot put the instance's data in: line {stmt.lineno} of its data "
                                   f"block assigns {', '.join(names)} together, the instance gives only "
                                   f"{', '.join(mine)}")
            texts += [f"{n} = {instance[n]!r}" for n in dict.fromkeys(names)]
            todo.difference_update(names)
            changed = True
        out += [t + "\n" for t in texts] if changed else lines[first - 1 : last]
        line = last + 1
    out += lines[line - 1 :]
    text = "".join(out)
    return text if not text or text.endswith("\n") else text + "\n"


def _only_instance_names(body: str, instance: dict[str, Any]) -> bool:
    """Whether every statement of the block assigns only names the instance gives."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = pyparse.parse(body)
    except SyntaxError:
        return False
    return all((a := assignment(st)) is not None and set(a[0]) <= set(instance) for st in tree.body)


def substitute_data(source: str, instance: dict[str, Any], *, where: str = "model") -> str:
    """Put an instance into the program's data block(s): the first assignment of each name the instance
    gives is replaced by the instance's value, the program's other lines (derived values, helpers, comments)
    stay; names the program never assigns there are put at the top of its first block."""
    try:
        spans = _data_spans(source)
    except DatasetError as e:
        raise DatasetError(f"{where}: {e}") from None
    if not spans:
        raise DatasetError(f"{where}: instance data given but the model has no '# Data' block")
    if len(spans) == 1 and _only_instance_names(source[spans[0][0] : spans[0][1]], instance):
        # Nothing of the program's own in the block: one line per entry, in the instance's order.
        body = "".join(f"{name} = {value!r}\n" for name, value in instance.items())
        return source[: spans[0][0]] + body + source[spans[0][1] :]
    todo = set(instance)
    bodies = [_substitute_block(source[a:b], instance, todo, where) for a, b in spans]
    if todo:
        bodies[0] = "".join(f"{n} = {instance[n]!r}\n" for n in instance if n in todo) + bodies[0]
    out, prev = [], 0
    for (a, b), body in zip(spans, bodies, strict=True):
        out += [source[prev:a], body]
        prev = b
    return "".join(out) + source[prev:]


def find_solution_dict(tree: ast.Module) -> ast.Dict | None:
    """The last `solution = {...}` dict literal (or dict literal passed to json.dumps) in a reference model."""
    found: ast.Dict | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(isinstance(t, ast.Name) and t.id == "solution" for t in node.targets):
                found = node.value
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "json.dumps" and node.args:
            if isinstance(node.args[0], ast.Dict):
                found = node.args[0]
    return found


def _solution_keys(tree: ast.Module) -> tuple[str, ...]:
    """Keys of the reference's printed solution dict: its `solution = {...}` literal, or, for a dict built over
    several statements (`sol = {}`, `sol["k"] = ...`, `sol.update(k=...)`, `dict(k=...)`), every constant key
    given to the name printed with `json.dumps`; () when a key is not a constant string."""
    found = find_solution_dict(tree)
    if found is not None and found.keys:
        keys = [k.value for k in found.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        return tuple(keys) if len(keys) == len(found.keys) else ()
    names = {"solution"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "json.dumps" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name):  # json.dumps(make_solution())
                arg = _returned(tree, arg.func.id) or arg
            if isinstance(arg, ast.Name):
                names.add(arg.id)
            elif (keys := _dict_call_keys(arg)) is not None:
                return keys
    out: list[str] = []
    for node in ast.walk(tree):
        new: list[str] | None = []
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
            v = node.value
            new = ([k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else None for k in v.keys]
                   if isinstance(v, ast.Dict) else list(_dict_call_keys(v) or []))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in names:
                    key = t.slice
                    new.append(key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
              and isinstance(node.func.value, ast.Name) and node.func.value.id in names):
            new = list(_dict_call_keys(ast.Call(ast.Name("dict"), node.args, node.keywords)) or [None])
        if None in new:  # type: ignore[operator]
            return ()
        out += [k for k in new if k not in out]  # type: ignore[union-attr, misc]
    return tuple(out)


def _returned(tree: ast.Module, function: str) -> ast.expr | None:
    """What the module-level function `function` returns last (a dict literal or a name), if it is defined."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            rets = [r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None]
            return rets[-1] if rets else None
    return None


def _dict_call_keys(node: ast.expr) -> tuple[str, ...] | None:
    """Keys of `dict(a=..., b=...)` or `dict({...})` / a dict literal; None when not such a call."""
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        return tuple(keys) if len(keys) == len(node.keys) else None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict"):
        return None
    keys = [kw.arg for kw in node.keywords]
    if None in keys:
        return None
    for a in node.args:
        inner = _dict_call_keys(a)
        if inner is None:
            return None
        keys += inner
    return tuple(k for k in keys if k is not None)


def objective_sense(tree: ast.Module) -> str | None:
    """'minimize' / 'maximize' when the model has an objective (`Model(minimize=...)` or `m.minimize(...)`)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if kw.arg in ("minimize", "maximize") and ast.unparse(node.func).endswith("Model"):
                return kw.arg
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("minimize", "maximize"):
            return node.func.attr
    return None


def _docstring(tree: ast.Module) -> str:
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value.strip()
    return ""


def parse_problem(folder: Folder) -> Problem:
    pid = folder.name
    model_path = folder / f"{pid}{MODEL_SUFFIX}"
    inst_path = folder / f"{pid}.json"
    for p in (model_path, inst_path):
        if not p.is_file():
            raise DatasetError(f"{p}: missing; each problem folder <id>/ needs <id>{MODEL_SUFFIX} and <id>.json")
    source = model_path.read_text(encoding="utf-8")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # LaTeX like \( in the docstrings is an invalid escape
            tree = pyparse.parse(source)
    except SyntaxError as e:
        raise DatasetError(f"{model_path}: not valid Python ({e.msg}, line {e.lineno})") from None
    headers = {m.group(1): m.group(2) for m in _HEADER.finditer(source.split('"""', 1)[0])}
    if "Category" not in headers:
        raise DatasetError(f"{model_path}: no '# Category:' header line; is this a DCP-Bench-Open model file?")
    timeout: float | None = None
    if "Timeout" in headers:
        try:
            timeout = float(headers["Timeout"])
        except ValueError:
            raise DatasetError(f"{model_path}: '# Timeout: {headers['Timeout']}' is not a number of seconds") from None
    description = _docstring(tree)
    if not description:
        raise DatasetError(f"{model_path}: no docstring with the problem description")
    try:
        span = _data_span(source)
    except DatasetError as e:
        raise DatasetError(f"{model_path}: {e}") from None
    default_data = source[span[0] : span[1]] if span else ""
    try:
        instances = json.loads(inst_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DatasetError(f"{inst_path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(instances, list) or not all(isinstance(i, dict) for i in instances):
        raise DatasetError(f"{inst_path}: expected a JSON list of instance objects")
    if instances and span is None:
        raise DatasetError(f"{model_path}: {inst_path.name} lists instances but the model has no '# Data' block")
    keys = _solution_keys(tree)
    if not keys:
        raise DatasetError(f"{model_path}: no `solution = {{...}}` dict literal with string keys found")
    sense = objective_sense(tree)
    return Problem(
        id=pid,
        category=headers["Category"],
        source=headers.get("Source", ""),
        timeout_s=timeout,
        description=description,
        default_data=default_data,
        instances=tuple(instances),
        reference_source=source,
        output_keys=keys,
        is_optimization=sense is not None,
        objective_sense=sense,
        path=Path(str(model_path)),
    )


def dataset_dir(path: str | Path | None) -> Folder:
    """The `dataset/` folder of a set's name (None: the default) or of a path: a checkout (holding `dataset/`),
    the `dataset/` folder itself, or a zip of either."""
    from triforge.data import resolve_path

    root = resolve_path(path, "cpbench")
    if not root.exists():
        raise DatasetError(f"{root}: no such folder; pass --data pointing at a DCP-Bench-Open checkout")
    if root.is_file():
        return _zip_dataset(root)
    if (root / "dataset").is_dir():
        return root / "dataset"
    if root.is_dir() and any((d / f"{d.name}{MODEL_SUFFIX}").is_file() for d in root.iterdir() if d.is_dir()):
        return root
    raise DatasetError(f"{root}: neither holds dataset/<id>/<id>{MODEL_SUFFIX} nor is such a dataset folder")


@lru_cache(maxsize=4)
def _zip_bytes(path: str, size: int, mtime_ns: int) -> zipfile.ZipFile:
    """The zip read into memory once (keyed by its size and time): no shared file offset across forks."""
    with open(path, "rb") as fh:
        zf = zipfile.ZipFile(io.BytesIO(fh.read()))
    zf.filename = path  # names the members' paths in messages
    return zf


def _zip_dataset(path: Path) -> zipfile.Path:
    try:
        st = path.stat()
        zf = _zip_bytes(str(path), st.st_size, st.st_mtime_ns)
    except (zipfile.BadZipFile, OSError) as e:
        raise DatasetError(f"{path}: not a readable zip of a DCP-Bench-Open checkout ({e})") from None
    top = zipfile.Path(zf)
    for base in [top, *(d for d in top.iterdir() if d.is_dir())]:  # GitHub archives: <repo>-<ref>/dataset/
        if (base / "dataset").is_dir():
            return base / "dataset"
    raise DatasetError(f"{path}: the zip holds no dataset/<id>/<id>{MODEL_SUFFIX} (at its top or under one folder)")


def problem_ids(path: str | Path | None = None) -> list[str]:
    return sorted(d.name for d in dataset_dir(path).iterdir() if d.is_dir() and not d.name.startswith((".", "_")))


def load_dataset(path: str | Path | None = None, ids: list[str] | None = None) -> list[Problem]:
    """All problems under `path` (a set's name or a path; None: the bundled set), or those in `ids`, by id."""
    if ids:
        return [load_problem(path, pid) for pid in ids]
    folder = dataset_dir(path)
    return [parse_problem(folder / pid) for pid in problem_ids(path)]


def load_problem(path: str | Path | None, problem_id: str) -> Problem:
    folder = dataset_dir(path)
    if not (folder / problem_id).is_dir():
        close = difflib.get_close_matches(problem_id, problem_ids(path), n=3, cutoff=0.5)
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise UserError(f"unknown problem id {problem_id!r} in {folder}{hint}")
    return parse_problem(folder / problem_id)
