"""HotpotQA answer scoring (the official normalization, exact match, F1) and feedback for reflection."""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any

from triforge.maestro.benchmarks.base import Example, MetricResult

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_SPECIAL = ("yes", "no", "noanswer")


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation, drop the articles a/an/the, collapse white space."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(gold)


def f1_score(prediction: str, gold: str) -> tuple[float, float, float]:
    """(F1, precision, recall) over normalized tokens; yes/no/noanswer must match exactly."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _SPECIAL or ref in _SPECIAL) and pred != ref:
        return 0.0, 0.0, 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision, recall = same / len(pred_tokens), same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall), precision, recall


def retrieved_titles(trace: list[Any]) -> list[str]:
    """Titles returned by every retrieve node of a run, first retrieval first, without repeats."""
    seen: dict[str, None] = {}
    for rec in trace:
        meta = rec.meta if hasattr(rec, "meta") else rec.get("meta", {})
        kind = rec.kind if hasattr(rec, "kind") else rec.get("kind")
        if kind == "retrieve":
            for t in meta.get("titles", []):
                seen.setdefault(t, None)
    return list(seen)


def hotpotqa_feedback(example: Example, answer: str, retrieved: list[str]) -> MetricResult:
    gold = str(example.gold["answer"])
    titles = list(example.gold.get("titles", []))
    em = exact_match(answer, gold)
    f1, _, _ = f1_score(answer, gold)
    missing = [t for t in titles if t not in retrieved]
    found = [t for t in titles if t in retrieved]
    if em:
        lines = [f"Correct: the answer {answer!r} matches the gold answer {gold!r}."]
    else:
        lines = [f"Wrong: the answer {answer!r} does not match the gold answer {gold!r} (token F1 {f1:.2f})."]
    if missing:
        lines.append("Gold documents not yet retrieved: " + ", ".join(repr(t) for t in missing) + ".")
        if found:
            lines.append("Gold documents retrieved: " + ", ".join(repr(t) for t in found) + ".")
        lines.append("A search query should name the entity that links the question to the missing document.")
    elif titles:
        lines.append(
            "All gold documents were retrieved ("
            + ", ".join(repr(t) for t in titles)
            + ")"
            + ("." if em else "; the answer was not read correctly from them.")
        )
    details = {
        "em": em,
        "f1": f1,
        "gold_answer": gold,
        "gold_titles": titles,
        "retrieved_titles": retrieved,
        "missing_titles": missing,
        "recall": (len(found) / len(titles)) if titles else None,
    }
    return MetricResult(score=1.0 if em else 0.0, feedback=" ".join(lines), details=details)


def hotpotqa_metric(example: Example, run: Any) -> MetricResult:
    """Exact match of the program's `answer`; feedback names the gold documents not yet retrieved."""
    answer = run.outputs.get("answer", "")
    return hotpotqa_feedback(example, str(answer), retrieved_titles(run.trace))
