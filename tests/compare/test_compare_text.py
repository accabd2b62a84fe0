"""Unit tests for the text scorers: exact, normalized, fuzzy, label."""

from __future__ import annotations

import pytest

from pytest_slam.compare.text import ExactScorer, FuzzyScorer, LabelScorer, NormalizedScorer

FULL_WIDTH = "\uff46\uff55\uff4c\uff4c\u3000\uff57\uff49\uff44\uff54\uff48"  # "full width"


def test_exact_identical_and_first_difference() -> None:
    scorer = ExactScorer()
    assert scorer.score("Paris", "Paris").value == 1.0
    score = scorer.score("Paris!", "Paris.")
    assert score.value == 0.0
    assert score.scorer == "exact"
    assert "char 5" in score.explanation


def test_exact_empty_answers_read_as_empty() -> None:
    scorer = ExactScorer()
    assert scorer.score("", "").value == 1.0
    assert scorer.score("", "Paris").explanation == "candidate answer is empty"
    assert scorer.score("Paris", "  ").explanation == "reference answer is empty"


@pytest.mark.parametrize(
    ("candidate", "reference"),
    [
        ("PARIS.", "paris"),
        ("  The   answer:\tParis ", "the answer paris"),
        (FULL_WIDTH, "full width"),  # NFKC folds full-width forms
        ("Straße", "STRASSE"),  # casefold, not lower
        ("“quoted”—text", "quoted text"),
    ],
)
def test_normalized_equal(candidate: str, reference: str) -> None:
    assert NormalizedScorer().score(candidate, reference).value == 1.0


def test_normalized_difference_and_switches() -> None:
    score = NormalizedScorer().score("Paris", "Lyon")
    assert score.value == 0.0
    assert "differ at char 0" in score.explanation
    assert NormalizedScorer(case=False).score("PARIS", "paris").value == 0.0
    assert NormalizedScorer(punctuation=False).score("Paris.", "Paris").value == 0.0
    assert NormalizedScorer(whitespace=False).score("a  b", "a b").value == 0.0
    assert NormalizedScorer(unicode=False).score(FULL_WIDTH, "full width").value == 0.0


def test_normalized_punctuation_only_is_empty() -> None:
    score = NormalizedScorer().score("...", "Paris")
    assert score.value == 0.0
    assert score.explanation == "candidate answer is empty"


def test_fuzzy_default_is_order_insensitive_but_counts_missing_words() -> None:
    scorer = FuzzyScorer()
    assert scorer.score("green apples, red cherries", "Red cherries; green apples").value == 1.0
    truncated = scorer.score("green apples", "green apples and red cherries and blue plums")
    assert 0.3 < truncated.value < 0.7
    assert truncated.explanation.startswith("token_sort_ratio ")


def test_fuzzy_token_set_scores_a_subset_as_perfect() -> None:
    """Why token_set_ratio is not the default: a truncated answer would look perfect."""
    subset = FuzzyScorer(method="token_set_ratio").score("green apples", "green apples and more")
    assert subset.value == 1.0


def test_fuzzy_real_values() -> None:
    scorer = FuzzyScorer(method="ratio")
    assert scorer.score("kitten", "sitting").value == pytest.approx(0.615, abs=0.001)
    assert scorer.score("abc", "xyz").value == 0.0
    assert FuzzyScorer(preprocess=False).score("ABC", "abc").value == 0.0
    assert FuzzyScorer().score("ABC", "abc").value == 1.0


def test_fuzzy_empty_and_huge() -> None:
    scorer = FuzzyScorer()
    assert scorer.score("", "").value == 1.0
    assert scorer.score("", "text").explanation == "candidate answer is empty"
    huge = "lorem ipsum dolor sit amet " * 8000  # ~216 KB
    score = scorer.score(huge, huge + "extra")
    assert score.value > 0.99


def test_fuzzy_unknown_method_names_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown method 'levenshtein'.*token_sort_ratio"):
        FuzzyScorer(method="levenshtein")


def test_label_same_class_case_insensitive() -> None:
    scorer = LabelScorer(choices=["positive", "negative", "neutral"])
    score = scorer.score("Sentiment: POSITIVE.", "The review is positive")
    assert (score.value, score.explanation) == (1.0, "both say positive")


def test_label_different_class() -> None:
    score = LabelScorer(choices=["positive", "negative"]).score("negative", "positive")
    assert score.value == 0.0
    assert score.explanation == "candidate says negative, reference says positive"


def test_label_word_boundaries() -> None:
    scorer = LabelScorer(choices=["bug", "feature"])
    none = scorer.score("This is debugging output", "bug")
    assert none.value == 0.0
    assert "candidate names none of ['bug', 'feature']" in none.explanation


def test_label_ambiguous_candidate_and_reference() -> None:
    scorer = LabelScorer(choices=["spam", "ham"])
    ambiguous = scorer.score("Either spam or ham", "spam")
    assert ambiguous.value == 0.0
    assert ambiguous.explanation == "candidate is ambiguous: names spam and ham"
    bad_ref = scorer.score("spam", "no idea")
    assert bad_ref.value == 0.0
    assert bad_ref.explanation.startswith("reference names none")


def test_label_longer_choice_wins_over_contained_one() -> None:
    scorer = LabelScorer(choices=["positive", "very positive", "negative"])
    assert scorer.labels_in("Very positive!") == ["very positive"]
    assert scorer.score("very positive", "positive").value == 0.0
    assert scorer.labels_in("positive, not very positive") == ["positive", "very positive"]


def test_label_needs_choices() -> None:
    with pytest.raises(ValueError, match="choices must be a non-empty list"):
        LabelScorer(choices=[])
    with pytest.raises(ValueError, match="choices must be a non-empty list"):
        LabelScorer(choices="positive")


def test_length_scores_the_shorter_over_the_longer_and_says_which() -> None:
    from pytest_slam.compare.text import LengthScorer

    scorer = LengthScorer()
    short = scorer.score("abcd", "abcdefgh")
    assert short.value == 0.5 and "shorter than the reference's 8" in short.explanation
    assert scorer.score("abcdefgh", "abcd").value == 0.5
    assert "longer" in scorer.score("abcdefgh", "abcd").explanation
    assert scorer.score("", "abc").value == 0.0  # an empty answer reads as such
    assert scorer.score("  same  ", "same").value == 1.0


def test_answer_words_normalize_as_squad_does() -> None:
    from pytest_slam.compare.text import answer_words

    assert answer_words("The  Eiffel-Tower, in PARIS!") == ["eiffel", "tower", "in", "paris"]
    assert answer_words("An apple a day") == ["apple", "day"]  # articles left out
    assert answer_words("\uff12\uff10\uff11\uff18 $5") == ["2018", "5"]  # NFKC; symbols as spaces
    assert answer_words("the .") == []


def test_containment_finds_the_short_answer_in_a_sentence_or_a_sentence_in_it() -> None:
    from pytest_slam.compare.text import ContainmentScorer

    scorer = ContainmentScorer()
    said = scorer.score(
        "It was awarded in 1901 to Wilhelm Conrad Röntgen.", "Wilhelm Conrad Röntgen"
    )
    assert (said.value, said.scorer) == (1.0, "containment")
    assert said.explanation == "the candidate says 'wilhelm conrad röntgen'"
    inside = scorer.score("Gemara", "the Mishnah and the Gemara")  # the candidate in the reference
    assert (inside.value, inside.explanation) == (1.0, "the reference says 'gemara'")
    order = scorer.score("Röntgen Conrad Wilhelm", "Wilhelm Conrad Röntgen")  # not one run
    assert order.value == 0.99  # every word, never 1.0 without the run
    part = scorer.score("Wilhelm Röntgen won it", "Wilhelm Conrad Röntgen")
    assert part.value == pytest.approx(2 / 3)
    assert (
        part.explanation
        == "2 of the reference's 3 words in the candidate ('wilhelm conrad röntgen')"
    )
    assert scorer.score("Marie Curie", "Wilhelm Conrad Röntgen").value == 0.0


def test_containment_reads_alternatives_but_not_a_fraction_or_a_date() -> None:
    from pytest_slam.compare.text import ContainmentScorer

    scorer = ContainmentScorer()
    assert scorer.answers("Sonu Nigam/Richa Sharma") == [["sonu", "nigam"], ["richa", "sharma"]]
    assert scorer.answers("April 1, 2016/April 8") == [["april", "1", "2016"], ["april", "8"]]
    assert scorer.answers("1/2 cup") == [["1", "2", "cup"]]  # between digits: no split
    assert scorer.answers("24/7") == [["24", "7"]]
    assert scorer.score("It was Richa Sharma.", "Sonu Nigam/Richa Sharma").value == 1.0
    best = scorer.score("Sonu sang it", "Sonu Nigam/Richa Sharma/Alka Yagnik")
    assert best.value == 0.5 and "('sonu nigam')" in best.explanation  # the best answer counts
    whole = ContainmentScorer(alternatives="")  # the reference as one answer
    assert whole.answers("Sonu Nigam/Richa Sharma") == [["sonu", "nigam", "richa", "sharma"]]
    assert whole.score("It was Richa Sharma.", "Sonu Nigam/Richa Sharma").value == 0.5
    semi = ContainmentScorer(alternatives=";")
    assert semi.score("Paris", "Lyon; Paris").value == 1.0


def test_containment_empty_answers_and_a_reference_without_words() -> None:
    from pytest_slam.compare.text import ContainmentScorer

    scorer = ContainmentScorer()
    assert scorer.score("", "Paris").explanation == "candidate answer is empty"
    assert scorer.score("", "").value == 1.0
    nothing = scorer.score("Paris", "The ...")
    assert (
        nothing.value == 0.0
        and nothing.explanation == "the reference has no words to find: 'The ...'"
    )
    assert scorer.score("...", "Paris").value == 0.0  # a candidate without words has none of them
