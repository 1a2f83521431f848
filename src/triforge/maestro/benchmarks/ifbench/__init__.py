"""IFBench: loader, splits, offline instruction checkers, strict/loose scoring and feedback."""

from __future__ import annotations

from triforge.maestro.benchmarks.ifbench.checkers import CHECKERS, describe
from triforge.maestro.benchmarks.ifbench.loader import (
    ENV_VAR,
    IFBenchExample,
    PromptIndex,
    load_ifbench,
    load_split,
    resolve_path,
    split_ifbench,
)
from triforge.maestro.benchmarks.ifbench.metric import (
    check_instruction,
    feedback_text,
    ifbench_metric,
    loose_variants,
    score_response,
)
from triforge.maestro.benchmarks.ifbench.program import SEED_STAGES, Stage

__all__ = [
    "CHECKERS",
    "ENV_VAR",
    "IFBenchExample",
    "PromptIndex",
    "SEED_STAGES",
    "Stage",
    "check_instruction",
    "describe",
    "feedback_text",
    "ifbench_metric",
    "load_ifbench",
    "load_split",
    "loose_variants",
    "resolve_path",
    "score_response",
    "split_ifbench",
]
