"""Evaluate a program over a data set: in parallel, scored, cached by (program hash, example id, sample).

Contract (the optimizer relies on it): one result per (example, sample), in input order; a failing
example scores 0 with its error and trace recorded and is never raised. Only a spent budget or a
replay-cache miss stops the evaluation, and neither leaves a result behind.

A stored result is reused only when it was made with the store's settings (`settings_hash`) from the
same example content (`item_hash`); every stored row records both and the commit its code came from.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triforge.core import context
from triforge.core.context import EndpointLimits
from triforge.core.provenance import content_hash
from triforge.executors.local import TaskFailed
from triforge.executors.local import current as current_executor
from triforge.maestro.benchmarks.base import Example, MetricResult
from triforge.maestro.interpreter import Interpreter, Models, ProgramRun, Retriever
from triforge.maestro.program import Program

Metric = Callable[[Example, ProgramRun], MetricResult]


@dataclass
class ExampleResult:
    example_id: str
    sample: int
    program_hash: str
    score: float
    feedback: str
    outputs: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None
    trace: list[dict[str, Any]] = field(default_factory=list)
    duration_s: float = 0.0
    item_hash: str = ""  # the example's content (example_hash) when it ran
    settings_hash: str = ""  # the run's settings fingerprint (triforge.core.provenance)
    commit: str | None = None  # the code's git commit, where known
    cached: bool = False

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.program_hash, self.example_id, self.sample)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("cached")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExampleResult:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "cached"})


def example_hash(example: Example) -> str:
    """The content an example's result depends on: its id, inputs and gold answer."""
    return content_hash({"id": example.id, "inputs": example.inputs, "gold": example.gold})


class ResultStore:
    """Results by (program hash, example id, sample), in memory and optionally appended to a JSONL file.

    Opening an existing file loads it (a torn last line is skipped), so a re-run resumes. With a `stamp`
    (`Fingerprint.stamp()`), rows are written with it and only rows made with the same settings are served.
    """

    def __init__(self, path: str | Path | None = None, stamp: dict[str, Any] | None = None) -> None:
        self.path = Path(path) if path else None
        self.stamp = stamp or {}
        self._data: dict[tuple[str, str, int], ExampleResult] = {}
        self._lock = threading.Lock()
        if self.path and self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    r = ExampleResult.from_dict(json.loads(line))
                except (json.JSONDecodeError, TypeError):
                    continue
                self._data[r.key] = r

    def get(self, program_hash: str, example_id: str, sample: int) -> ExampleResult | None:
        with self._lock:
            hit = self._data.get((program_hash, example_id, sample))
        want = self.stamp.get("settings_hash")
        return hit if hit is not None and (want is None or hit.settings_hash == want) else None

    def rows(self) -> list[ExampleResult]:
        with self._lock:
            return list(self._data.values())

    def put(self, result: ExampleResult) -> None:
        if self.stamp:
            result.settings_hash, result.commit = self.stamp["settings_hash"], self.stamp.get("commit")
        with self._lock:
            self._data[result.key] = result
            if self.path:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(result.to_dict(), ensure_ascii=False, default=str) + "\n")

    def __len__(self) -> int:
        return len(self._data)


@dataclass
class EvalReport:
    program_hash: str
    results: list[ExampleResult]
    wall_s: float

    @property
    def mean_score(self) -> float:
        return statistics.fmean(r.score for r in self.results) if self.results else 0.0

    @property
    def errors(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            if r.error_kind:
                out[r.error_kind] = out.get(r.error_kind, 0) + 1
        return out

    def summary(self) -> dict[str, Any]:
        return {"program_hash": self.program_hash, "n": len(self.results), "mean_score": self.mean_score,
                "errors": self.errors, "cached": sum(r.cached for r in self.results), "wall_s": self.wall_s}


def score_run(example: Example, run: ProgramRun, metric: Metric) -> MetricResult:
    """The metric's verdict, or 0 with the reason when the run failed or the metric raised."""
    if not run.ok:
        return MetricResult(0.0, f"The program failed before producing its outputs: {run.error}",
                            {"error": run.error})
    try:
        return metric(example, run)
    except Exception as e:  # a metric bug must not sink the data set run; it is recorded
        return MetricResult(0.0, f"The metric could not grade this output: {type(e).__name__}: {e}",
                            {"metric_error": f"{type(e).__name__}: {e}"})


def evaluate_one(interpreter: Interpreter, example: Example, metric: Metric, sample: int = 0,
                 store: ResultStore | None = None, item_hash: str | None = None) -> ExampleResult:
    h = interpreter.program.hash
    item_hash = item_hash or example_hash(example)
    hit = store.get(h, example.id, sample) if store is not None else None
    if hit is not None and hit.item_hash == item_hash:  # a row for other content is run again, never served
        hit.cached = True
        return hit
    if (budget := context.budget()) is not None:
        budget.check()  # a spent budget stops the evaluation before the next example starts
    t0 = time.perf_counter()
    tracer = context.tracer()
    span = tracer.span(f"example {example.id}", "chain", **{"triforge.example.id": example.id,
                                                             "triforge.sample": sample,
                                                             "triforge.program.hash": h}) \
        if tracer else contextlib.nullcontext({})
    with span as attrs:
        run = interpreter.run(example.inputs, sample=sample)
        verdict = score_run(example, run, metric)
        attrs["triforge.score"] = verdict.score
        if run.error:
            attrs["triforge.error"] = run.error
    metric_error = verdict.details.get("metric_error")
    result = ExampleResult(
        example_id=example.id, sample=sample, program_hash=h, score=float(verdict.score),
        feedback=verdict.feedback, outputs=run.outputs, details=dict(verdict.details),
        error=run.error or metric_error, error_kind=run.error_kind or ("metric" if metric_error else None),
        trace=[t.to_dict() for t in run.trace], duration_s=time.perf_counter() - t0, item_hash=item_hash,
    )
    if store is not None and result.error_kind != "endpoint":  # an endpoint failure is retried on resume
        store.put(result)
    return result


@contextlib.contextmanager
def _endpoint_limits() -> Iterator[None]:
    if context.endpoint_limits() is not None:
        yield
        return
    with context.use(limits=EndpointLimits()):
        yield


@dataclass(frozen=True)
class EvalItem:
    """One (example, sample) as a task; what every task shares travels once, in `SharedRun`."""

    example: Example
    sample: int
    item_hash: str


@dataclass(frozen=True)
class SharedRun:
    """The task function of an evaluation: the program's interpreter (models, retrievers) and the metric,
    sent once per evaluation to each worker, not once per example."""

    interpreter: Interpreter
    metric: Metric

    def __call__(self, item: EvalItem) -> ExampleResult:
        """`evaluate_one` without a store: the caller serves stored results and stores new ones."""
        return evaluate_one(self.interpreter, item.example, self.metric, item.sample, None, item.item_hash)


def evaluate(program: Program, examples: Sequence[Example], metric: Metric, models: Models, *,
             retrievers: dict[str, Retriever] | None = None, jobs: int = 16, samples: int = 1,
             store: ResultStore | None = None,
             on_result: Callable[[ExampleResult], None] | None = None,
             hash_example: Callable[[Example], str] = example_hash) -> EvalReport:
    """Run and score every (example, sample); calls to one endpoint are capped by its max_concurrency.

    `hash_example` gives the content a result depends on (a benchmark whose inputs only name the data,
    like CP-Bench's, hashes the data itself). Examples not served by `store` fan out over the current
    executor (`triforge.executors.local.current`); results are stored here, in the caller's process.
    """
    interpreter = Interpreter(program, models, retrievers)
    hashes = {ex.id: hash_example(ex) for ex in examples}
    items = [(ex, s) for ex in examples for s in range(samples)]
    t0 = time.perf_counter()
    results: list[ExampleResult | None] = [None] * len(items)
    todo: list[int] = []
    for k, (ex, s) in enumerate(items):
        hit = store.get(program.hash, ex.id, s) if store is not None else None
        if hit is not None and hit.item_hash == hashes[ex.id]:  # a row for other content is run again
            hit.cached = True
            results[k] = hit
            if on_result is not None:
                on_result(hit)
        else:
            todo.append(k)

    def done(j: int, r: ExampleResult | BaseException) -> None:
        if isinstance(r, TaskFailed):  # its worker died on every attempt: scored 0, run again on resume
            ex, s = items[todo[j]]
            r = ExampleResult(ex.id, s, program.hash, 0.0, f"The evaluation did not finish: {r}", error=str(r),
                              error_kind="worker", item_hash=hashes[ex.id])
        if not isinstance(r, ExampleResult):
            return
        results[todo[j]] = r
        if store is not None and r.error_kind not in ("endpoint", "worker"):  # both are retried on resume
            store.put(r)
        if on_result is not None:
            on_result(r)

    tasks = [EvalItem(items[k][0], items[k][1], hashes[items[k][0].id]) for k in todo]
    with _endpoint_limits():
        current_executor().map(SharedRun(interpreter, metric), tasks, jobs=jobs, on_done=done)
    return EvalReport(program.hash, results, time.perf_counter() - t0)  # type: ignore[arg-type]
