"""One-off tasks: multiples, quizzes, ordered lists, reversed text, CSV, dates."""

from __future__ import annotations

import csv
import io
import re

from triforge.maestro.benchmarks.ifbench.checkers.registry import Kwargs, register
from triforge.maestro.benchmarks.ifbench.sentences import split_sentences
from triforge.maestro.benchmarks.ifbench.text import PUNCT, ascii_fold, remove_punct

EUROPEAN_CAPITALS_NORTH_TO_SOUTH = (
    "Reykjavik Helsinki Oslo Tallinn Stockholm Riga Moscow Copenhagen Vilnius Minsk Dublin Berlin "
    "Amsterdam Warsaw London Brussels Prague Luxembourg Paris Vienna Bratislava Budapest Vaduz "
    "Chisinau Bern Ljubljana Zagreb"
).split()


@register(
    "custom:multiples",
    "Count from 10 to 50 printing only the multiples of 7 (14, 21, 28, 35, 42, 49) and no other numbers.",
)
def multiples(response: str, kw: Kwargs) -> bool:
    return re.findall(r"\d+", response.replace(",", ", ")) == [str(i) for i in range(14, 51, 7)]


@register(
    "custom:mcq_count_length",
    'Write exactly 4 multiple-choice questions labelled "Question N", each with 5 options (A-E), '
    "each question longer than the last, and nothing else.",
)
def mcq_count_length(response: str, kw: Kwargs) -> bool:
    if not response.startswith("Question"):
        return False
    parts = re.split(r"\n*(?:Question \d+[\.|\):;]?\s*)", response)
    questions = [p.strip() for p in parts if p.strip()]
    if len(questions) != 4:
        return False
    lengths = []
    for q in questions:
        text, n_options, in_options = "", 0, False
        for line in q.split("\n"):
            if re.match(r"^[A-Ea-e][\.|\)]\s*\w+", line.strip()):
                n_options += 1
                in_options = True
            elif not in_options:
                text += " " + line.strip()
        if n_options != 5:
            return False
        lengths.append(len(text.strip()))
    return all(a < b for a, b in zip(lengths, lengths[1:], strict=False))


@register(
    "custom:reverse_newline",
    "List the countries of Africa in reverse alphabetical order, one per line, starting with Zimbabwe.",
)
def reverse_newline(response: str, kw: Kwargs) -> bool:
    lines = [line.strip(PUNCT + " ") for line in response.split("\n")]
    lines = [line for line in lines if line]
    start = next((i for i, line in enumerate(lines) if "Zimbabwe" in line), None)
    if start is None or len(lines) - start < 52:
        return False
    folded = [ascii_fold(line) for line in lines[start:]]
    return folded == sorted(folded, reverse=True)


@register(
    "custom:word_reverse",
    "Answer with the words of the sentence in reverse order (the answer is the bald eagle).",
)
def word_reverse(response: str, kw: Kwargs) -> bool:
    text = " ".join(remove_punct(response.lower().strip()).split()[::-1])
    return "bald eagle" in text and text in split_sentences(text)


@register(
    "custom:character_reverse",
    "Answer with the letters of the sentence in reverse order (the answer is the bald eagle).",
)
def character_reverse(response: str, kw: Kwargs) -> bool:
    return "elgae dlab" in response.lower()


@register(
    "custom:sentence_alphabet", "Tell a 26-sentence story whose sentences start with A, B, C, ... Z in order."
)
def sentence_alphabet(response: str, kw: Kwargs) -> bool:
    sents = split_sentences(response)
    if len(sents) != 26:
        return False
    for i, sent in enumerate(sents):
        ws = sent.lstrip().split()
        if not ws or ws[0][0].lower() != chr(ord("a") + i):
            return False
    return True


@register(
    "custom:european_capitals_sort",
    "List only the capitals of European countries north of 45 degrees latitude, comma-separated, from north to south.",
)
def european_capitals_sort(response: str, kw: Kwargs) -> bool:
    names = [c.strip() for c in ascii_fold(response).split(",") if c.strip()]
    return names == EUROPEAN_CAPITALS_NORTH_TO_SOUTH


def _rows(text: str, delimiter: str = ",") -> list[list[str]]:
    """CSV rows; text the csv module cannot parse yields no rows (so fails every CSV check)."""
    try:
        return list(csv.reader(io.StringIO(text), delimiter=delimiter))
    except csv.Error:
        return []


@register(
    "custom:csv_city",
    "Output CSV with header ID,Country,City,Year,Count and exactly 7 comma-delimited data rows.",
)
def csv_city(response: str, kw: Kwargs) -> bool:
    rows = _rows(response)
    return (
        len(rows) == 8
        and rows[0] == ["ID", "Country", "City", "Year", "Count"]
        and all(len(r) == 5 for r in rows[1:])
    )


_SPECIAL_HEADER = re.compile(
    r'^(ProductID|"ProductID"),[ \t]*(Category|"Category"),[ \t]*(Brand|"Brand"),[ \t]*(Price|"Price"),[ \t]*(Stock|"Stock")$'
)


@register(
    "custom:csv_special_character",
    "Output CSV with header ProductID,Category,Brand,Price,Stock and 14 data rows; one field must hold a special character inside double quotes.",
)
def csv_special_character(response: str, kw: Kwargs) -> bool:
    if not _SPECIAL_HEADER.match(response.split("\n")[0].strip()):
        return False
    rows = _rows(response.replace('"', '"""'))  # keep the quotes visible in the parsed fields
    if len(rows) != 15:
        return False
    for row in rows[1:]:
        if len(row) != 5:
            return False
        if any(re.match(r'".*[^\d\w\s].*"', field) for field in row):
            return True
    return False


_QUOTES_HEADER = re.compile(
    r'^(StudentID|"StudentID")\t *(Subject|"Subject")\t *(Grade|"Grade")\t *(Semester|"Semester")\t *(Score|"Score")$'
)


@register(
    "custom:csv_quotes",
    "Output tab-delimited data with header StudentID, Subject, Grade, Semester, Score and 3 rows, every field in double quotes.",
)
def csv_quotes(response: str, kw: Kwargs) -> bool:
    if not _QUOTES_HEADER.match(response.split("\n")[0].strip()):
        return False
    rows = _rows(response.replace('"', '"""'), delimiter="\t")
    if len(rows) != 4:
        return False
    for row in rows:
        if len(row) != 5:
            return False
        for field in row:
            f = field.strip()
            if not (len(f) >= 1 and f[0] == '"' and f[-1] == '"'):
                return False
    return True


_DAYS_IN_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


@register(
    "custom:date_format_list",
    "List only dates as YYYY-MM-DD separated by commas (years 1769-1821), with no explanation.",
)
def date_format_list(response: str, kw: Kwargs) -> bool:
    for item in response.strip().split(","):
        item = item.strip()
        if not re.match(r"^\d{4}-\d{2}-\d{2}$", item):
            return False
        year, month, day = (int(x) for x in item.split("-"))
        if not 1769 <= year <= 1821 or month > 12:
            return False
        if month in _DAYS_IN_MONTH and day > _DAYS_IN_MONTH[month]:
            return False
    return True
