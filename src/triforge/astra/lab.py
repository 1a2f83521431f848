"""The lab as a library: check, bench and profile take source text and return typed results.

Agents (and people writing scripts) call these instead of the CLI. Everything GPU-side still runs in
the lab's worker process (`triforge.astra.worker`); this module adds typed results, user task files
(`load_task_file`), extra test shapes from the testing agent, and a timing-shape override used by the
final check on held-out shapes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triforge.astra import gpu
from triforge.astra.bench import copy_gbs
from triforge.astra.candidate import Candidate, CandidateError, check_interface, kernel_params, resolve_launch
from triforge.astra.check_host import precheck
from triforge.astra.evaluate import EvalOptions, evaluate
from triforge.astra.profile import profile as run_profile
from triforge.astra.task import ELEM_SIZE, Shape, TaskSpec, all_tasks, get_task, shape_label
from triforge.core.errors import UserError

_CTYPE_OF_KIND = {"ptr": "T*", "i32": "int", "i64": "long long", "f32": "float"}
MAX_EXTRA_SHAPE_BYTES = 1 << 30  # a testing agent's shape may not move more than 1 GiB (fp32)


@dataclass
class ShapeTiming:
    shape: str
    baseline_us: float
    candidate_us: float
    speedup: float
    aa_spread: float
    speedup_real: bool
    candidate_gbs: float
    min_bytes: int

    @classmethod
    def of(cls, row: dict[str, Any]) -> ShapeTiming:
        return cls(row["shape"], float(row["baseline_us"]), float(row["candidate_us"]), float(row["speedup"]),
                   float(row["aa_spread"]), bool(row["speedup_real"]), float(row["candidate_gbs"]),
                   int(row["min_bytes"]))


@dataclass
class CheckResult:
    """A lab verdict (correct | incorrect | hack | crash | compile_error) with its reasons and timings."""

    verdict: str
    reasons: list[str] = field(default_factory=list)
    timings: list[ShapeTiming] = field(default_factory=list)
    seed: int | None = None
    copy_gbs: float | None = None  # torch's device-to-device copy bandwidth (read + write): a yardstick
    raw: dict[str, Any] = field(default_factory=dict)
    achievable_gbs: float | None = None  # what the lab's own streaming kernels reach: the roofline

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CheckResult:
        return cls(d.get("verdict", "crash"), [str(r) for r in d.get("reasons", [])],
                   [ShapeTiming.of(r) for r in d.get("timings", [])], d.get("seed"), d.get("copy_gbs"), d,
                   d.get("achievable_gbs"))

    def to_dict(self) -> dict[str, Any]:
        return {**self.raw, "verdict": self.verdict, "reasons": self.reasons, "seed": self.seed,
                "copy_gbs": self.copy_gbs, "achievable_gbs": self.achievable_gbs,
                "timings": [dataclasses.asdict(t) for t in self.timings]}

    def roofline(self) -> list[float]:
        """Per timing shape: the time its DRAM traffic takes at the achievable bandwidth / the measured time
        (1.0 = at the ceiling); from torch's copy bandwidth where the worker reported no roofline."""
        rows = [r for r in self.raw.get("timings", []) if "roofline_fraction" in r]
        if rows and len(rows) == len(self.timings):
            return [float(r["roofline_fraction"]) for r in rows]
        bw = self.achievable_gbs or self.copy_gbs
        if not bw:
            return []
        return [t.min_bytes / (bw * 1e9) / (t.candidate_us * 1e-6) for t in self.timings]


@dataclass
class BenchRow:
    shape: str
    comparator: str
    median_us: float
    copy_fraction: float
    speedup_vs_baseline: float
    verified: str


@dataclass
class BenchResult:
    rows: list[BenchRow]
    copy_gbs: float
    notes: list[str]
    device: str = ""


@dataclass
class ProfileResult:
    shape: str
    digest: str
    metrics: dict[str, Any]


# --- tasks ---------------------------------------------------------------------------------------

def register_task(spec: TaskSpec) -> None:
    """Make a user task findable by name in this process (the lab looks tasks up with `get_task`)."""
    all_tasks()[spec.name] = spec


def load_task_file(path: str | Path) -> TaskSpec:
    """Load, validate and register a task file: a Python file defining `TASK` (a TaskSpec) whose baseline
    kernel is `BASELINE_FILE` (relative to the task file) or, by default, the file beside it named
    `<stem>.cu`. Every problem is a UserError naming the fix, raised before any model call."""
    p = Path(path).resolve()
    if not p.is_file():
        raise UserError(f"task file {path} not found")
    name = "triforge_user_task_" + hashlib.sha256(str(p).encode()).hexdigest()[:12]
    spec_obj = importlib.util.spec_from_file_location(name, p)
    if spec_obj is None or spec_obj.loader is None:
        raise UserError(f"task file {path}: not a Python file")
    mod = importlib.util.module_from_spec(spec_obj)
    try:
        spec_obj.loader.exec_module(mod)
    except Exception as exc:  # noqa: BLE001 - the user's file: one line saying what broke
        raise UserError(f"task file {path} failed to load: {type(exc).__name__}: {exc}") from None
    task = getattr(mod, "TASK", None)
    if not isinstance(task, TaskSpec):
        raise UserError(f"task file {path} must define TASK = TaskSpec(...) (see docs/astra.md), "
                        f"found {type(task).__name__}")
    baseline = p.parent / str(getattr(mod, "BASELINE_FILE", p.with_suffix(".cu").name))
    if not baseline.is_file():
        raise UserError(f"task file {path}: baseline kernel {baseline} not found (set BASELINE_FILE)")
    task.baseline_path = baseline
    validate_task(task, str(path))
    if task.name in _builtin_names():
        raise UserError(f"task file {path}: name {task.name!r} is a built-in task; choose another name")
    register_task(task)
    return task


def _builtin_names() -> set[str]:
    from triforge.astra import tasks as pkg

    root = Path(pkg.__file__).resolve().parent
    return {n for n, t in all_tasks().items() if t.baseline_path and t.baseline_path.resolve().parent.parent == root}


def validate_task(task: TaskSpec, where: str) -> None:
    def bad(msg: str) -> UserError:
        return UserError(f"task file {where}: {msg}")

    if not task.name.isidentifier():
        raise bad(f"name {task.name!r} must be an identifier")
    for attr in ("make_inputs", "reference", "eager", "min_bytes", "flops"):
        if not callable(getattr(task, attr)):
            raise bad(f"{attr} must be callable")
    for which in ("train", "heldout", "timing"):
        if not getattr(task, which):
            raise bad(f"no {which} shapes: give at least one")
    if not task.outputs and not task.inplace:
        raise bad("declare the outputs (outputs=[...]) or in-place inputs (inplace=[...])")
    names = {p.name for p in task.params}
    for k in task.outputs + task.inplace:
        if k not in names:
            raise bad(f"output {k!r} is not a kernel parameter")
    bad_dt = [d for d in task.dtypes if d not in ELEM_SIZE]
    if bad_dt:
        raise bad(f"unknown dtype(s) {bad_dt}: use bf16, fp16, fp32")
    source = task.baseline_source()
    try:
        got = kernel_params(source, task.entry)
        check_interface(source, source, task.entry)
    except CandidateError as exc:
        raise bad(f"baseline {task.baseline_path}: {exc}") from None
    want = [_CTYPE_OF_KIND.get(p.kind, "?") for p in task.params]
    if len(got) != len(want) or any(g != w and not (w == "T*" and g.endswith("*")) for g, w in zip(got, want, strict=False)):
        raise bad(f"params ({', '.join(f'{p.name}:{p.kind}' for p in task.params)}) do not match the baseline's "
                  f"parameter list ({', '.join(got)})")
    for key in ("grid", "block"):
        if key not in task.default_launch:
            raise bad(f"default_launch needs {key!r}")
    keys = set(task.train[0])
    for shape in task.train + task.fuzz + task.heldout + task.timing:
        if set(shape) != keys:
            raise bad(f"shape {shape} has keys {sorted(shape)}, the first train shape {sorted(keys)}")
        try:
            env = {**shape, "elem_size": 2, "vec": 8}
            resolve_launch({}, task.default_launch, env)  # candidates without launch lines get the default
            resolve_launch(Candidate.from_source(source).launch_exprs, task.default_launch, env)
        except CandidateError as exc:
            raise bad(f"launch for {shape_label(shape)}: {exc}") from None


def check_kernel(task: TaskSpec, source: str, where: str) -> None:
    """A starting kernel must have the task's entry point and parameter list (checked before any model call)."""
    try:
        Candidate.from_source(source)
        check_interface(source, task.baseline_source(), task.entry)
    except CandidateError as exc:
        raise UserError(f"kernel {where} does not match task {task.name}: {exc}") from None


def validate_shape(task: TaskSpec, shape: dict[str, Any]) -> Shape:
    """A test shape proposed by an agent: the task's keys, positive integers, at most 1 GiB moved (fp32)."""
    keys = set(task.train[0])
    if set(shape) != keys:
        raise ValueError(f"a shape needs exactly the keys {sorted(keys)}, got {sorted(shape)}")
    out = {}
    for k, v in shape.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{k} must be a positive integer, got {v!r}")
        out[k] = v
    if task.min_bytes(out, "fp32") > MAX_EXTRA_SHAPE_BYTES:
        raise ValueError(f"shape {shape_label(out)} moves more than 1 GiB: choose a smaller one")
    return out


# --- check, bench, profile -------------------------------------------------------------------------

def check(task_name: str, source: str, *, worker: Any, shapes: str = "train", timing: bool = True,
          extra_shapes: list[Shape] | None = None, time_heldout: bool = False, task_file: str | None = None,
          seed: int | None = None, runs: int = 200, timeout: float | None = None) -> CheckResult:
    """The lab's check of `source`: static precheck here, everything else in `worker`."""
    if task_file:
        load_task_file(task_file)
    early = precheck(task_name, source)
    if early is not None:
        return CheckResult.from_dict(early)
    job = {"kind": "lab_evaluate",
           "kwargs": {"task_name": task_name, "source": source, "task_file": task_file,
                      "extra_shapes": extra_shapes or [], "time_heldout": time_heldout,
                      "options": {"shapes": shapes, "timing": timing, "base_seed": seed, "runs": runs}}}
    res = worker.call(job, timeout)
    res.pop("fatal", None)
    return CheckResult.from_dict(res)


def evaluate_in_worker(task_name: str, source: str, task_file: str | None, extra_shapes: list[Shape],
                       time_heldout: bool, options: dict[str, Any]) -> dict[str, Any]:
    """Runs inside the worker: registers the task variant (user file, extra shapes) and evaluates."""
    gpu.ensure_context()
    task = load_task_file(task_file) if task_file else get_task(task_name)
    variant = dataclasses.replace(task, train=list(task.train) + [dict(s) for s in extra_shapes])
    if time_heldout:
        variant = dataclasses.replace(variant, timing=list(task.heldout))
    register_task(variant)
    try:
        out = evaluate(task_name, source, EvalOptions(**options)).to_dict()
    finally:
        register_task(task)
    from triforge.astra.timing import device

    out["copy_gbs"] = copy_gbs()
    out["achievable_gbs"] = device().achievable_gbs
    out["peak_gbs"] = device().peak_gbs
    return out


def bench(task_name: str, source: str | None, *, worker: Any, runs: int = 100, use_compile: bool = True,
          task_file: str | None = None, timeout: float = 1200) -> BenchResult:
    """The comparator table (baseline, candidate, eager, torch.compile, FlashInfer when installed or when
    $TRIFORGE_FLASHINFER_INCLUDE names its headers)."""
    if task_file:
        raise UserError("bench of a user task file is not supported yet; check and optimize are")
    from triforge.astra.flashinfer_headers import prepared

    res = worker.call({"kind": "bench", "task": task_name, "source": source,
                       "options": {"runs": runs, "use_compile": use_compile, "flashinfer_lib": prepared()}}, timeout)
    if "rows" not in res:
        raise RuntimeError(f"bench failed: {'; '.join(map(str, res.get('reasons', [])))[:500]}")
    rows = [BenchRow(r["shape"], r["comparator"], r["median_us"], r["copy_fraction"], r["speedup_vs_baseline"],
                     r["verified"]) for r in res["rows"]]
    return BenchResult(rows, res["copy_gbs"], list(res.get("notes", [])), res.get("device", ""))


def profile(task_name: str, source: str, *, shape_index: int = 0, dtype: str = "bf16",
            timeout: float = 300, gpu: str | None = None) -> ProfileResult:
    """ncu digest of `source` on one timing shape (on `gpu`, a CUDA_VISIBLE_DEVICES entry, when given);
    a kernel the static scan rejects is never profiled."""
    early = precheck(task_name, source)
    if early is not None:
        raise UserError(f"not profiled: {early['verdict']}: {early['reasons'][0]}")
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "candidate.cu")
        Path(path).write_text(source)
        res = run_profile(task_name, path, shape_index, dtype, timeout, gpu=gpu)
    return ProfileResult(res["shape"], res["digest"], res["metrics"])


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
