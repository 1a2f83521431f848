"""HotpotQA: loaders, splits, the official answer metric, BM25 retrieval and feedback."""

from __future__ import annotations

from triforge.maestro.benchmarks.hotpotqa.data import (
    CORPUS_ENV_VAR,
    ENV_VAR,
    SPLITS,
    load_hotpotqa,
    load_hotpotqa_corpus,
    split_examples,
    to_example,
)
from triforge.maestro.benchmarks.hotpotqa.metric import (
    exact_match,
    f1_score,
    hotpotqa_feedback,
    hotpotqa_metric,
    normalize_answer,
    retrieved_titles,
)

__all__ = [
    "CORPUS_ENV_VAR",
    "ENV_VAR",
    "SPLITS",
    "exact_match",
    "f1_score",
    "hotpotqa_feedback",
    "hotpotqa_metric",
    "load_hotpotqa",
    "load_hotpotqa_corpus",
    "normalize_answer",
    "retrieved_titles",
    "split_examples",
    "to_example",
]
