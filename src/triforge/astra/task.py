"""What a kernel task is: semantics (a PyTorch reference), inputs, outputs, tolerances, shapes, costs.

A task never imports torch at module level: the task list, shape sets, parameter lists and
baseline sources are plain data that CI reads without a GPU. The callables (`make_inputs`,
`reference`, `eager`) import torch when called.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError

DTYPES = ("bf16", "fp16", "fp32")
CTYPE = {"bf16": "__nv_bfloat16", "fp16": "__half", "fp32": "float"}
ELEM_SIZE = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class Param:
    """One kernel parameter. kind: 'ptr' (a tensor by name), 'i32', 'i64' or 'f32' (a scalar by name)."""

    name: str
    kind: str


@dataclass(frozen=True)
class Tol:
    """Per-dtype tolerance: ||out-ref||/||ref|| <= rel_norm and |out-ref| <= abs_tol*max|ref| + rtol*|ref|."""

    rel_norm: float
    rtol: float
    abs_tol: float


DEFAULT_TOLS = {
    "bf16": Tol(rel_norm=6e-3, rtol=1.6e-2, abs_tol=4e-3),
    "fp16": Tol(rel_norm=1e-3, rtol=2e-3, abs_tol=5e-4),
    "fp32": Tol(rel_norm=1e-5, rtol=1e-4, abs_tol=1e-5),
}

Shape = dict[str, int]


@dataclass(frozen=True)
class Reduction:
    """A reduction over rows of an input (a sum of squares, an absolute maximum): the oracle's adversarial
    sets put outliers at every residue class of the strides kernels use, so skipping one index in N shows.
    `length`: the shape key giving the row length; `quiet`: other operands of the same sum, set to the
    background so the outliers dominate."""

    operand: str
    length: str
    kind: str  # sumsq | max
    quiet: tuple[str, ...] = ()


@dataclass
class TaskSpec:
    """One operator to optimize.

    `make_inputs(shape, dtype, seed, special)` returns a dict of CUDA tensors and scalars holding
    every kernel input, every output (allocated, contents irrelevant) and every scalar parameter.
    `reference(inputs, dtype)` returns the expected value of every output and in-place input,
    computed in float64 (or float32 / exact integer math where that is the op's definition).
    `eager(inputs)` performs the op with PyTorch ops in place on `inputs` (comparators).
    `exact` names outputs compared bit for bit after rounding; `compare` overrides the comparison
    of one output (e.g. fp8 codes) and returns a list of failure reasons.
    """

    name: str
    entry: str
    params: list[Param]
    outputs: list[str]
    inplace: list[str]
    dtypes: tuple[str, ...]
    train: list[Shape]
    heldout: list[Shape]
    fuzz: list[Shape]
    timing: list[Shape]
    make_inputs: Callable[..., dict[str, Any]]
    reference: Callable[..., dict[str, Any]]
    eager: Callable[[dict[str, Any]], None]
    min_bytes: Callable[[Shape, str], int]
    flops: Callable[[Shape], int]
    default_launch: dict[str, str]
    description: str = ""
    tols: dict[str, Tol] = field(default_factory=lambda: dict(DEFAULT_TOLS))
    exact: tuple[str, ...] = ()
    compare: dict[str, Callable[..., list[str]]] = field(default_factory=dict)
    output_tols: dict[str, Tol] = field(default_factory=dict)
    nondeterministic: bool = False
    flashinfer: Callable[[dict[str, Any]], None] | None = None
    baseline_path: Path | None = None
    # the oracle varies each named scalar argument over these values across its input sets
    scalars: dict[str, tuple[float, ...]] = field(default_factory=dict)
    reductions: tuple[Reduction, ...] = ()

    @property
    def written(self) -> list[str]:
        return list(self.outputs) + list(self.inplace)

    def baseline_source(self) -> str:
        assert self.baseline_path is not None
        return self.baseline_path.read_text()

    def tol(self, output: str, dtype: str) -> Tol:
        return self.output_tols.get(output) or self.tols[dtype]

    def shapes(self, which: str) -> list[Shape]:
        # the timing shapes are checked too: a bug that shows only there is `incorrect`, never `hack`
        if which == "train":
            return list(self.train) + list(self.fuzz) + list(self.timing)
        if which == "heldout":
            return list(self.heldout)
        if which == "fuzz":
            return list(self.fuzz)
        if which == "sanitize":
            return list(self.fuzz) + list(self.train[:1])
        if which == "all":
            return list(self.train) + list(self.fuzz) + list(self.timing) + list(self.heldout)
        raise UserError(f"unknown shape set {which!r}: use train, heldout, all, fuzz or sanitize")

    def name_expressions(self) -> dict[str, str]:
        return {dt: f"{self.entry}<{CTYPE[dt]}>" for dt in self.dtypes}


def shape_label(shape: Shape) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


@cache
def all_tasks() -> dict[str, TaskSpec]:
    """Every task under `triforge.astra.tasks`, by name."""
    from triforge.astra import tasks as pkg

    found: dict[str, TaskSpec] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        spec: TaskSpec = mod.TASK
        spec.baseline_path = Path(mod.__file__).parent / "baseline.cu"
        found[spec.name] = spec
    return found


def get_task(name: str) -> TaskSpec:
    tasks = all_tasks()
    if name not in tasks:
        raise UserError(f"unknown task {name!r}; known: {', '.join(sorted(tasks))}")
    return tasks[name]
