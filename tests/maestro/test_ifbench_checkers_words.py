"""Word-, sentence- and ratio-family checkers: planted failures fail, valid alternatives pass."""

from __future__ import annotations

from triforge.maestro.benchmarks.ifbench import CHECKERS


def check(iid: str, response: str, **kw) -> bool:
    return CHECKERS[iid](response, kw)


def test_alphabet_loop_wraps_after_z():
    assert check("words:alphabet", "Xylophones yield zebras, after bees.")
    assert not check("words:alphabet", "Apples bananas cherries apples")
    assert not check("words:alphabet", "123 apples")


def test_vowel_single_paragraph_at_most_three_vowels():
    assert check("words:vowel", "A cat sat at a mat, and all pals clap.")
    assert not check("words:vowel", "Quite unusual vowels everywhere.")
    assert not check("words:vowel", "A cat sat.\nA bat sat.")


def test_consonant_clusters_in_every_word():
    assert check("words:consonants", "Strong plants stand tall")
    assert not check("words:consonants", "Strong trees are tall")  # "are" has no cluster


def test_palindromes_ten_of_length_five():
    good = " ".join(
        ["level", "radar", "civic", "kayak", "refer", "rotor", "madam", "stats", "tenet", "racecar"]
    )
    assert check("words:palindrome", good)
    assert not check("words:palindrome", good.replace("racecar", "car"))


def test_prime_lengths():
    assert check("words:prime_lengths", "We are at the sea")
    assert not check("words:prime_lengths", "This word fails")  # 4 letters


def test_start_verb():
    assert check("words:start_verb", "Write the report today.")
    assert check("words:start_verb", "Running late, she left.")
    assert not check("words:start_verb", "The report is due.")
    assert not check("words:start_verb", "42 is the answer.")


def test_repeats_limit():
    assert check("words:repeats", "the cat and the dog", small_n=2)
    assert not check("words:repeats", "the cat, the dog, the bird", small_n=2)


def test_odd_even_syllables_alternate():
    assert check("words:odd_even_syllables", "cat apple dog")  # 1, 2, 1
    assert not check("words:odd_even_syllables", "cat dog apple")  # 1, 1


def test_last_word_first_next():
    assert check("words:last_first", "I love cats. Cats love fish. Fish swim.")
    assert not check("words:last_first", "I love cats. Dogs love fish.")


def test_paragraph_last_first():
    assert check("words:paragraph_last_first", "Home is where I go home.\nLove conquers all, love.")
    assert not check("words:paragraph_last_first", "Home is where I go.\n")


def test_no_consecutive_first_letter():
    assert check("words:no_consecutive", "A big cat dozed.")
    assert not check("words:no_consecutive", "Big bad cat.")


def test_keyword_specific_position():
    text = "First sentence here. The second has keyword fox here."
    assert check("words:keywords_specific_position", text, keyword="fox", n=2, m=5)
    assert not check("words:keywords_specific_position", text, keyword="fox", n=2, m=4)
    assert not check("words:keywords_specific_position", text, keyword="fox", n=3, m=1)


def test_words_position_second_and_second_to_last():
    assert check("words:words_position", "I apple like you apple too.", keyword="apple")
    assert not check("words:words_position", "I apple like you too apple.", keyword="apple")


def test_sentence_keyword_nth_sentence():
    text = "One here. Two has zebra. Three."
    assert check("sentence:keyword", text, word="zebra", N=2)
    assert not check("sentence:keyword", text, word="zebra", N=3)
    assert not check("sentence:keyword", text, word="zeb", N=2)  # whole words only


def test_sentence_increment():
    assert check("sentence:increment", "I run. I run fast. I run very fast.", small_n=1)
    assert not check("sentence:increment", "I run. I run fast. I run fast.", small_n=1)


def test_alliteration_increment():
    assert check("sentence:alliteration_increment", "Big dogs bark. Silly snakes slither slowly.")
    assert not check("sentence:alliteration_increment", "Silly snakes slither. Big dogs bark.")


def test_stop_word_percentage():
    assert check("ratio:stop_words", "Cats chase mice quickly.", percentage=10)
    assert not check("ratio:stop_words", "The cat is on the mat.", percentage=40)


def test_sentence_type_ratio_and_balance():
    assert check("ratio:sentence_type", "Cats nap. Dogs run. Why?")
    assert not check("ratio:sentence_type", "Cats nap. Why? How?")
    assert check("ratio:sentence_balance", "Yes. Why? Wow!")
    assert not check("ratio:sentence_balance", "Yes. No. Why? Wow!")


def test_trigram_overlap_within_two_points():
    ref = "the quick brown fox jumps over the lazy dog"
    assert check("ratio:overlap", ref, reference_text=ref, percentage=100)
    assert not check("ratio:overlap", "zzzzzz qqqqq", reference_text=ref, percentage=50)


def test_three_sentences_same_length():
    assert check("ratio:sentence_words", "Cats nap. Dogs run. Owls fly.")
    assert not check("ratio:sentence_words", "Cats nap. Dogs run fast. Owls fly.")
    assert not check("ratio:sentence_words", "Cats nap. Dogs run.")
