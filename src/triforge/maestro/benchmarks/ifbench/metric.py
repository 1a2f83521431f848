"""Strict and loose IFBench scoring, and the metric with feedback for reflection."""

from __future__ import annotations

from typing import Literal

from triforge.maestro.benchmarks.base import Example, MetricResult
from triforge.maestro.benchmarks.ifbench.checkers import CHECKERS, describe
from triforge.maestro.benchmarks.ifbench.checkers.explain import explain

Mode = Literal["strict", "loose"]
MODES: tuple[str, ...] = ("strict", "loose")


def loose_variants(response: str) -> list[str]:
    """The response and its loose-mode relaxations.

    First line removed, last line removed, both removed (each stripped), and each of
    those four with every `*` deleted.
    """
    lines = response.split("\n")
    trimmed = [
        response,
        "\n".join(lines[1:]).strip(),
        "\n".join(lines[:-1]).strip(),
        "\n".join(lines[1:-1]).strip(),
    ]
    return trimmed + [t.replace("*", "") for t in trimmed]


def _instructions(example: Example) -> list[tuple[str, dict]]:
    """(instruction id, kwargs) pairs from `example.gold` (any `Example`, not only an `IFBenchExample`)."""
    ids = list(example.gold["instruction_id_list"])
    kwargs = [{k: v for k, v in (kw or {}).items() if v is not None} for kw in example.gold["kwargs"]]
    return list(zip(ids, kwargs, strict=True))


def check_instruction(instruction_id: str, kwargs: dict, response: str) -> bool:
    """Strict check of one instruction; an empty response or a checker error is a failure."""
    if not response or not response.strip():
        return False
    checker = CHECKERS.get(instruction_id)
    if checker is None:
        raise KeyError(f"no checker for IFBench instruction {instruction_id!r}")
    try:
        return bool(checker(response, kwargs))
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        return False


def score_response(example: Example, response: str, mode: Mode | str = "strict") -> list[bool]:
    """One boolean per instruction of `example`, in `instruction_id_list` order."""
    if mode not in MODES:
        raise ValueError(f"mode must be 'strict' or 'loose', not {mode!r}")
    variants = [response] if mode == "strict" else loose_variants(response or "")
    return [any(check_instruction(iid, kw, v) for v in variants) for iid, kw in _instructions(example)]


def feedback_text(example: Example, verdicts: list[bool], mode: str = "strict", response: str = "") -> str:
    """Plain words naming every failed constraint with its parameters (and, given the response,
    what it actually has where a count helps: "found 132 words")."""
    failed = [(iid, kw) for (iid, kw), ok in zip(_instructions(example), verdicts, strict=True) if not ok]
    total = len(verdicts)
    if not failed:
        return f"All constraints are satisfied ({total} of {total}, {mode} check)."
    lines = [f"{len(failed)} of {total} constraints failed ({mode} check):"]
    for iid, kw in failed:
        params = {k: v for k, v in kw.items() if k not in ("prompt_to_repeat", "reference_text")}
        suffix = f" [{iid}; {_fmt(params)}]" if params else f" [{iid}]"
        found = explain(iid, response, kw) if response else ""
        lines.append(f"- {describe(iid, kw)}{suffix}" + (f" ({found})" if found else ""))
    return "\n".join(lines)


def _fmt(params: dict) -> str:
    return ", ".join(
        f"{k}={int(v) if isinstance(v, float) and v.is_integer() else v!r}" for k, v in params.items()
    )


def ifbench_metric(example: Example, response: str, mode: Mode | str = "strict") -> MetricResult:
    """Fraction of the example's instructions followed, with feedback naming the failures.

    Never raises for a bad response: an empty or malformed one scores 0.
    """
    verdicts = score_response(example, response or "", mode)
    score = sum(verdicts) / len(verdicts) if verdicts else 0.0
    return MetricResult(
        score=score,
        feedback=feedback_text(example, verdicts, mode, response or ""),
        details={
            "mode": mode,
            "instruction_id_list": list(example.gold["instruction_id_list"]),
            "follow_instruction_list": verdicts,
            "follow_all_instructions": all(verdicts),
        },
    )
