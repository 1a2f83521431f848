"""The benchmarks maestro is judged on, behind one small interface.

A benchmark gives examples for a split, a metric `(example, run) -> MetricResult` that never raises
for a bad output, a seed program, and the retrievers its programs may use. Optionally `settings()`:
the sources a result depends on beyond the examples (HotpotQA's retrieval corpus), for resume checks. One whose example inputs
only name the data (CP-Bench) also has `example_hash(example)`: the content a result depends on, so a
run directory never reuses a result for changed data (`maestro.evaluate.example_hash` otherwise).
"""

from __future__ import annotations

import inspect
from functools import cached_property
from typing import Any, Protocol

from triforge.core.errors import UserError
from triforge.maestro.benchmarks.base import Example, MetricResult
from triforge.maestro.interpreter import ProgramRun, Retriever
from triforge.maestro.program import Program


class Benchmark(Protocol):
    name: str
    splits: tuple[str, ...]
    default_jobs: int  # examples in parallel when the user does not say

    def examples(self, split: str) -> list[Example]: ...

    def metric(self, example: Example, run: ProgramRun) -> MetricResult: ...

    def seed_program(self) -> Program: ...

    def retrievers(self) -> dict[str, Retriever]: ...


class HotpotQABench:
    name = "hotpotqa"
    default_jobs = 16

    def __init__(self, data: str | None = None, corpus: str | None = None, seed: int = 0) -> None:
        from triforge.maestro.benchmarks.hotpotqa import SPLITS

        self.splits = SPLITS
        self._data, self._corpus, self._seed = data, corpus, seed

    @cached_property
    def _loaded(self) -> tuple[list[Example], list[Any]]:
        from triforge.maestro.benchmarks.hotpotqa import load_hotpotqa

        return load_hotpotqa(self._data)

    def examples(self, split: str) -> list[Example]:
        from triforge.maestro.benchmarks.hotpotqa import split_examples

        return split_examples(self._loaded[0], split, seed=self._seed)

    def metric(self, example: Example, run: ProgramRun) -> MetricResult:
        from triforge.maestro.benchmarks.hotpotqa import hotpotqa_metric

        return hotpotqa_metric(example, run)

    def seed_program(self) -> Program:
        from triforge.maestro.programs.hotpotqa import hotpotqa_seed

        return hotpotqa_seed()

    @cached_property
    def _retriever(self) -> Retriever:
        from triforge.maestro.benchmarks.hotpotqa import load_hotpotqa_corpus
        from triforge.maestro.bm25 import BM25Retriever

        fallback = self._loaded[1] if self._data is not None else None
        return BM25Retriever(load_hotpotqa_corpus(self._corpus, fallback=fallback))

    def retrievers(self) -> dict[str, Retriever]:
        return {"default": self._retriever}

    def settings(self) -> dict[str, Any]:
        """Where the questions and the retrieval corpus come from (flags or environment), by content."""
        import os

        from triforge.core.provenance import file_hash
        from triforge.maestro.benchmarks.hotpotqa.data import CORPUS_ENV_VAR, resolve_path

        data = resolve_path(self._data)  # each question's content is checked by its item hash
        corpus = self._corpus if self._corpus is not None else os.environ.get(CORPUS_ENV_VAR)
        if corpus is not None:
            source: dict[str, Any] = {"path": str(corpus), "hash": file_hash(corpus) or str(corpus)}
        elif self._data is not None:  # load_hotpotqa_corpus's fallback: the data file's contexts
            source = {"from": "data", "hash": file_hash(data) if isinstance(data, os.PathLike) else str(data)}
        else:
            source = {"from": "mini"}
        return {"data": str(data), "corpus": source}


class IFBenchBench:
    name = "ifbench"
    default_jobs = 16
    splits = ("train", "val", "test")

    def __init__(self, data: str | None = None, mode: str = "strict", seed: int = 0) -> None:
        if mode not in ("strict", "loose"):
            raise UserError(f"IFBench mode must be strict or loose, not {mode!r}")
        self._data, self.mode, self._seed = data, mode, seed

    def examples(self, split: str) -> list[Example]:
        from triforge.maestro.benchmarks.ifbench import load_ifbench, load_split

        if split == "all":
            return list(load_ifbench(self._data))
        return list(load_split(split, self._data, seed=self._seed))

    def metric(self, example: Example, run: ProgramRun) -> MetricResult:
        from triforge.maestro.benchmarks.ifbench import ifbench_metric

        return ifbench_metric(example, str(run.outputs.get("response", "")), self.mode)  # type: ignore[arg-type]

    def seed_program(self) -> Program:
        from triforge.maestro.programs.ifbench import ifbench_seed

        return ifbench_seed()

    def retrievers(self) -> dict[str, Retriever]:
        return {}


BENCHMARKS = ("hotpotqa", "ifbench", "cpbench")


def benchmark_class(name: str) -> type:
    if name == "hotpotqa":
        return HotpotQABench
    if name == "ifbench":
        return IFBenchBench
    if name == "cpbench":
        from triforge.maestro.benchmarks.cpbench import CPBench

        return CPBench
    raise UserError(f"unknown benchmark {name!r}: use one of {', '.join(BENCHMARKS)}")


def open_benchmark(name: str, **options: Any) -> Benchmark:
    """A benchmark by name; options it does not take, and None-valued ones, are dropped."""
    cls = benchmark_class(name)
    accepted = set(inspect.signature(cls.__init__).parameters)
    return cls(**{k: v for k, v in options.items() if k in accepted and v is not None})
