"""Formatting instructions: brackets, quotes, bullets, indentation, templates, casing."""

from __future__ import annotations

import re

from triforge.maestro.benchmarks.ifbench.checkers.registry import Kwargs, register
from triforge.maestro.benchmarks.ifbench.sentences import split_sentences
from triforge.maestro.benchmarks.ifbench.text import (
    PUNCT,
    is_emoji,
    remove_punct,
    strip_punct,
    word_tokenize,
)

_CLOSER = {")": "(", "]": "[", "}": "{"}


@register(
    "format:parentheses", "Nest parentheses, brackets and braces at least 5 levels deep, correctly closed."
)
def parentheses(response: str, kw: Kwargs) -> bool:
    stack: list[str] = []
    deepest = 0
    for ch in response:
        if ch in "([{":
            stack.append(ch)
            deepest = max(deepest, len(stack))
        elif ch in _CLOSER:
            if stack and stack[-1] == _CLOSER[ch]:
                stack.pop()
                if deepest >= 5:
                    return True
            else:  # a mismatched closer starts the count afresh
                stack, deepest = [], 0
    return False


@register("format:quotes", "Nest quotes at least 3 levels deep, alternating double and single quotes.")
def quotes(response: str, kw: Kwargs) -> bool:
    stack: list[str] = []
    deepest = 0
    for ch in response:
        if stack and ch == stack[-1]:
            stack.pop()
            if deepest - len(stack) >= 3:
                return True
        elif ch in "\"'":
            stack.append(ch)
            deepest = max(deepest, len(stack))
    return False


def _parse_options(options: str) -> tuple[list[str], bool]:
    exact = re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", options) is not None
    sep = "/" if "/" in options else "or" if "or" in options else ","
    return [o.strip() for o in options.split(sep)], exact


@register("format:options", "Answer with exactly one of these options and nothing else: {options}.")
def options(response: str, kw: Kwargs) -> bool:
    choices, exact = _parse_options(str(kw["options"]))
    if exact:  # letter options must match verbatim
        return response in choices
    answer = strip_punct(response).lower()
    return any(strip_punct(c).lower() == answer for c in choices)


@register("format:newline", "Write each word on its own line.")
def newline(response: str, kw: Kwargs) -> bool:
    text = remove_punct(response).strip()
    lines = [line for line in text.split("\n") if line != ""]
    return len(lines) == len(text.split())


@register("format:emoji", "End every sentence with an emoji.")
def emoji(response: str, kw: Kwargs) -> bool:
    sents = [remove_punct(s).strip() for s in split_sentences(response)]
    for i, sent in enumerate(sents):
        if not sent:
            return False
        if is_emoji(sent[-1]) or is_emoji(sent[-2] if len(sent) > 1 else sent[-1]):
            continue
        # the emoji may have been split off as the start of the next "sentence"
        if i + 1 < len(sents) and sents[i + 1] and is_emoji(sents[i + 1][0]):
            continue
        return False
    return True


def _drop_blank_lines_like_official(lines: list[str]) -> list[str]:
    """Remove blank lines the way a list mutated during iteration does (one after a removed line survives)."""
    kept = list(lines)
    i = 0
    while i < len(kept):
        if not kept[i].strip():
            kept.remove(kept[i])
        i += 1
    return kept


@register("format:line_indent", "Indent each new line further than the one before (a staircase).")
def line_indent(response: str, kw: Kwargs) -> bool:
    lines = _drop_blank_lines_like_official(response.split("\n"))
    indents = [len(line) - len(line.lstrip(" ")) for line in lines]
    return all(b > a for a, b in zip(indents, indents[1:], strict=False))


@register("format:quote_unquote", "Follow every quoted phrase with an unquoted explanation.")
def quote_unquote(response: str, kw: Kwargs) -> bool:
    text = response.replace("“", '"').replace("”", '"')
    text = text.replace("'\"'", "")  # a mention of the character '"' itself
    text = "".join(text.split())
    if '""' in text:
        return False
    tail = text.strip("0123456789" + PUNCT.replace('"', ""))
    return not (tail and tail[-1] == '"')


@register("format:list", "Answer with a list of items that uses {sep} instead of bullet points.")
def special_list(response: str, kw: Kwargs) -> bool:
    return len(re.findall(re.escape(str(kw["sep"])), response)) >= 2


@register(
    "format:thesis",
    "Begin each section with a thesis statement in HTML italics (<i>...</i>), followed by text.",
)
def thesis(response: str, kw: Kwargs) -> bool:
    start = response.find("<i>")
    if start == -1:
        start = response.find("<em>")
        if start == -1:
            return False
    rest = response[start:]
    end = rest.find("</i>")
    if end == -1:
        end = rest.find("</em>")
        if end == -1:
            return False
    return rest[3:end].strip() != "" and rest[end + 4 :].strip() != ""


@register("format:sub-bullets", "Use bullet points marked * and give each at least one sub-bullet marked -.")
def sub_bullets(response: str, kw: Kwargs) -> bool:
    return all("-" in part for part in response.split("*")[1:])


@register(
    "format:no_bullets_bullets",
    "Write at least two sentences ending in a period, then at least two bullet points marked *.",
)
def no_bullets_bullets(response: str, kw: Kwargs) -> bool:
    prose = True  # still in the opening sentences
    sentences = bullets = 0
    for line in response.split("\n"):
        if line.strip().startswith("*"):
            prose = False
            if sentences < 2:
                return False
            bullets += 1
        elif prose:
            found = split_sentences(line.strip())
            sentences += len(found)
            prose = bool(found)  # a blank line ends the prose part
        else:
            return False
    return bullets >= 2


@register("format:title_case", "Write the entire response in title case.")
def title_case(response: str, kw: Kwargs) -> bool:
    for tok in word_tokenize(response):
        if not tok[:1].isalpha():
            continue
        if len(tok) == 1:
            if tok.islower():
                return False
        elif tok[0].islower() and (tok[1:].islower() or tok[1:].isupper()):
            return False
    return True


@register(
    "format:output_template",
    "Use the template: My Answer: [answer] My Conclusion: [conclusion] Future Outlook: [outlook].",
)
def output_template(response: str, kw: Kwargs) -> bool:
    return all(part in response for part in ("My Answer:", "My Conclusion:", "Future Outlook:"))


@register("format:no_whitespace", "Do not use any whitespace.")
def no_whitespace(response: str, kw: Kwargs) -> bool:
    return not any(ch.isspace() for ch in response)
