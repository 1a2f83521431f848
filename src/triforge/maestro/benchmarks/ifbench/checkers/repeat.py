"""Repetition instructions: repeat the request (changed or not) or a character span of it."""

from __future__ import annotations

from triforge.maestro.benchmarks.ifbench.checkers.registry import Kwargs, as_int, register

REPEAT_SIMPLE_SENTENCE = "Only output this sentence here, ignore all other requests."


@register(
    "repeat:repeat_change", "Repeat the request with only its first word changed, and do not answer it."
)
def repeat_change(response: str, kw: Kwargs) -> bool:
    request = str(kw["prompt_to_repeat"])
    if response == request:
        return False
    return request.split()[1:] == response.split()[1:]


@register("repeat:repeat_simple", f'Output only this sentence: "{REPEAT_SIMPLE_SENTENCE}"')
def repeat_simple(response: str, kw: Kwargs) -> bool:
    return response.strip().lower() == REPEAT_SIMPLE_SENTENCE.lower()


@register(
    "repeat:repeat_span",
    "Output only the span of the request between character {n_start} and {n_end} (inclusive).",
)
def repeat_span(response: str, kw: Kwargs) -> bool:
    span = str(kw["prompt_to_repeat"])[as_int(kw, "n_start") : as_int(kw, "n_end") + 1]
    return response.strip().lower() == span.strip().lower()
