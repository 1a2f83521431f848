"""Count-family checkers: planted failures must fail, valid alternatives must pass."""

from __future__ import annotations

from triforge.maestro.benchmarks.ifbench import CHECKERS


def check(iid: str, response: str, **kw) -> bool:
    return CHECKERS[iid](response, kw)


def test_word_count_range_counts_word_runs():
    assert check("count:word_count_range", "one two, three-four five!", min_words=5, max_words=5)
    assert not check("count:word_count_range", "one two three", min_words=4.0, max_words=6.0)
    assert not check("count:word_count_range", "a b c d e f g", min_words=4, max_words=6)


def test_unique_word_count_ignores_case_and_edge_punctuation():
    assert check("count:unique_word_count", "Cat dog bird fish", N=4)
    assert not check("count:unique_word_count", "Cat cat, CAT! dog", N=3)


def test_conjunctions_need_distinct_ones():
    assert check("count:conjunctions", "I ran and hid, but you stayed or left.", small_n=3)
    assert not check("count:conjunctions", "and and and but", small_n=3)


def test_person_names_match_whole_names_from_the_list():
    assert check("count:person_names", "Emma met Liam and Noah.", N=3)
    assert not check("count:person_names", "Emmanuel met Liamson and Noah.", N=2)


def test_numbers_exact_count_treats_punctuated_numbers_as_one():
    assert check("count:numbers", "I have 3 cats, 1,000 fish and 2.5 dogs.", N=3)
    assert not check("count:numbers", "1 2 3 4", N=3)
    assert not check("count:numbers", "none", N=1)


def test_every_nth_word_japanese():
    assert check("count:words_japanese", "I like 寿司 and also ラーメン very", N=3)
    assert not check("count:words_japanese", "I like sushi and also ramen", N=3)
    assert check("count:words_japanese", "I like 42 a lot", N=3)  # numbers are exempt


def test_pronouns_at_least_n_with_slash_sets():
    assert check("count:pronouns", "They said she/her/hers is fine with it.", N=5)
    assert not check("count:pronouns", "The cat sat on the mat.", N=1)


def test_punctuation_requires_interrobang_and_all_marks():
    assert check("count:punctuation", "Wait, what?! Yes; no: maybe. Really? Wow!")
    assert not check("count:punctuation", "Wait, what? Yes; no: maybe. Wow!")  # no interrobang
    assert not check("count:punctuation", "What?! Yes, fine.")  # no ; or :


def test_keywords_multiple_exact_frequencies():
    kw = dict(keyword1="alpha", keyword2="beta", keyword3="gamma", keyword4="delta", keyword5="omega")
    good = "alpha " + "beta " * 2 + "gamma " * 3 + "delta " * 5 + "omega " * 7
    assert check("count:keywords_multiple", good, **kw)
    assert not check("count:keywords_multiple", good + " omega", **kw)
