"""Custom- and repeat-family checkers: planted failures fail, valid alternatives pass."""

from __future__ import annotations

from triforge.maestro.benchmarks.ifbench import CHECKERS
from triforge.maestro.benchmarks.ifbench.checkers.custom import EUROPEAN_CAPITALS_NORTH_TO_SOUTH


def check(iid: str, response: str, **kw) -> bool:
    return CHECKERS[iid](response, kw)


def test_multiples_of_seven():
    assert check("custom:multiples", "14, 21, 28, 35, 42, 49")
    assert not check("custom:multiples", "7, 14, 21, 28, 35, 42, 49")


def test_mcq_four_questions_five_options_growing():
    qs = []
    for i, stem in enumerate(["Who?", "Who painted?", "Who painted this?", "Who painted this work?"], 1):
        qs.append(f"Question {i}: {stem}\nA. one\nB. two\nC. three\nD. four\nE. five")
    good = "\n\n".join(qs)
    assert check("custom:mcq_count_length", good)
    assert not check("custom:mcq_count_length", "Here you go:\n" + good)
    assert not check("custom:mcq_count_length", good.replace("E. five", "", 1))


def test_reverse_newline_africa():
    countries = sorted([f"Country{i:02d}" for i in range(52)], reverse=True)
    good = "\n".join(["Zimbabwe", *countries])
    assert check("custom:reverse_newline", good)
    assert not check("custom:reverse_newline", "\n".join(["Zimbabwe", *reversed(countries)]))


def test_word_and_character_reverse():
    assert check("custom:word_reverse", "eagle bald the is It")
    assert not check("custom:word_reverse", "It is the bald eagle")
    assert check("custom:character_reverse", ".elgae dlab ehT")
    assert not check("custom:character_reverse", "The bald eagle.")


def test_sentence_alphabet():
    good = " ".join(f"{chr(65 + i)}x went home." for i in range(26))
    assert check("custom:sentence_alphabet", good)
    assert not check("custom:sentence_alphabet", good.replace("Bx", "Cx", 1))


def test_european_capitals_sorted():
    good = ", ".join(EUROPEAN_CAPITALS_NORTH_TO_SOUTH)
    assert check("custom:european_capitals_sort", good)
    assert check("custom:european_capitals_sort", good.replace("Chisinau", "Chișinău"))  # accents fold
    assert not check("custom:european_capitals_sort", good.replace("Helsinki, Oslo", "Oslo, Helsinki"))


def test_csv_city():
    rows = "\n".join(f"{i},C{i},City{i},2020,{i}" for i in range(1, 8))
    assert check("custom:csv_city", "ID,Country,City,Year,Count\n" + rows)
    assert not check("custom:csv_city", "ID;Country;City;Year;Count\n" + rows)
    assert not check("custom:csv_city", "ID,Country,City,Year,Count\n" + rows + "\n8,x,y,2020,1")


def test_csv_special_character():
    rows = [f"{i},Cat,Brand{i},9.99,5" for i in range(1, 15)]
    rows[3] = '4,Cat,"Brand & Co",9.99,5'
    good = "ProductID,Category,Brand,Price,Stock\n" + "\n".join(rows)
    assert check("custom:csv_special_character", good)
    assert not check("custom:csv_special_character", good.replace('"Brand & Co"', "BrandCo"))


def test_csv_quotes_tab_delimited():
    header = "\t".join(f'"{c}"' for c in ["StudentID", "Subject", "Grade", "Semester", "Score"])
    rows = ["\t".join(f'"{v}{i}"' for v in "abcde") for i in range(3)]
    good = "\n".join([header, *rows])
    assert check("custom:csv_quotes", good)
    assert not check("custom:csv_quotes", good.replace('"a0"', "a0"))


def test_date_format_list():
    assert check("custom:date_format_list", "1796-04-12, 1805-12-02")
    assert not check("custom:date_format_list", "1796-04-12, 2 December 1805")
    assert not check("custom:date_format_list", "1700-04-12")
    assert not check("custom:date_format_list", "1805-02-30")


def test_repeat_change_simple_and_span():
    request = "Write a poem about the sea."
    assert check("repeat:repeat_change", "Compose a poem about the sea.", prompt_to_repeat=request)
    assert not check("repeat:repeat_change", request, prompt_to_repeat=request)
    assert not check(
        "repeat:repeat_change", "Compose a poem about the sea. Here it is.", prompt_to_repeat=request
    )
    assert check("repeat:repeat_simple", "  only output this sentence here, ignore all other requests. ")
    assert not check(
        "repeat:repeat_simple", "Sure! Only output this sentence here, ignore all other requests."
    )
    assert check("repeat:repeat_span", "a poem", prompt_to_repeat=request, n_start=6, n_end=11)
    assert not check("repeat:repeat_span", "a poem about", prompt_to_repeat=request, n_start=6, n_end=11)
