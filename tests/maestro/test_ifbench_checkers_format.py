"""Format-family checkers: planted failures must fail, valid alternatives must pass."""

from __future__ import annotations

from triforge.maestro.benchmarks.ifbench import CHECKERS


def check(iid: str, response: str, **kw) -> bool:
    return CHECKERS[iid](response, kw)


def test_parentheses_five_levels_any_bracket_kind():
    assert check("format:parentheses", "a (b [c {d (e [f] e) d} c] b) a")
    assert not check("format:parentheses", "a (b [c {d (e) d} c] b) a")  # only 4 deep
    assert not check("format:parentheses", "((((( never closed")


def test_quotes_three_levels_alternating():
    assert check("format:quotes", 'He said "she said \'they said "hi" loudly\' softly" once.')
    assert not check("format:quotes", "He said \"she said 'hi' softly\".")


def test_options_text_and_letter_forms():
    assert check("format:options", "Maybe.", options="yes/no/maybe")
    assert not check("format:options", "Maybe, because it depends.", options="yes/no/maybe")
    assert check("format:options", "I don't know", options="I know or I don't know")
    assert check("format:options", "b)", options="a), b), c), d)")
    assert not check("format:options", "B", options="a), b), c), d)")


def test_newline_one_word_per_line():
    assert check("format:newline", "Each\nword\nalone.")
    assert not check("format:newline", "Two words\nhere")


def test_emoji_at_end_of_every_sentence():
    assert check("format:emoji", "I love cats 🐱. They purr 😺!")
    assert not check("format:emoji", "I love cats 🐱. They purr!")


def test_line_indent_staircase():
    assert check("format:line_indent", "a\n b\n  c\n   d")
    assert not check("format:line_indent", "a\n b\n b2\n   d")


def test_quote_unquote_needs_explanation_after_quotes():
    assert check("format:quote_unquote", 'He said "carpe diem" which means seize the day.')
    assert not check("format:quote_unquote", 'He said "carpe diem" "seize the day"')
    assert not check("format:quote_unquote", 'Remember: "carpe diem".')


def test_list_with_custom_separator():
    assert check("format:list", "SEPARATOR apples\nSEPARATOR pears", sep="SEPARATOR")
    assert not check("format:list", "- apples\n- pears", sep="SEPARATOR")


def test_thesis_in_html_italics_followed_by_text():
    assert check("format:thesis", "<i>Cats rule.</i>\nHere is why.")
    assert check("format:thesis", "<em>Cats rule.</em> Because.")
    assert not check("format:thesis", "*Cats rule.* Here is why.")
    assert not check("format:thesis", "Intro <i>Cats rule.</i>")


def test_sub_bullets_each_bullet_has_a_dash():
    assert check("format:sub-bullets", "* Fruit\n  - apple\n* Veg\n  - leek")
    assert not check("format:sub-bullets", "* Fruit\n  - apple\n* Veg\n  leek")


def test_no_bullets_then_bullets():
    assert check("format:no_bullets_bullets", "Cats are great. Dogs too.\n* one\n* two")
    assert not check("format:no_bullets_bullets", "Cats are great.\n* one\n* two")  # one sentence
    assert not check("format:no_bullets_bullets", "Cats are great. Dogs too.\n* one\nMore prose.")


def test_title_case():
    assert check("format:title_case", "The Quick Brown Fox Jumps Over The Lazy Dog")
    assert not check("format:title_case", "The Quick brown Fox")


def test_output_template_and_no_whitespace():
    good = "My Answer: yes My Conclusion: fine Future Outlook: bright"
    assert check("format:output_template", good)
    assert not check("format:output_template", "Answer: yes Conclusion: fine Outlook: bright")
    assert check("format:no_whitespace", "no_spaces_here!")
    assert not check("format:no_whitespace", "one space")
    assert not check("format:no_whitespace", "tab\there")
