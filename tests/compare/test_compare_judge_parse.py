"""Unit tests for reading judges' verdicts: grades and pairwise preferences."""

from __future__ import annotations

import pytest

from pytest_slam.compare.judge_parse import JudgeUnparseable, parse_grade, parse_preference


@pytest.mark.parametrize(
    ("answer", "grade"),
    [
        ("The answer is accurate.\n\nRating: [[7]]", 7),
        ("Rating: [[8.5]]", 8.5),
        ("[[10]]", 10),
        ("7/10", 7),
        ("Overall: 6 / 10.", 6),
        ("I'd give it a 7", 7),
        ("I would rate this an 8 because it is close.", 8),
        ('{"score": 7, "reason": "ok"}', 7),
        ('Verdict follows. {"Rating": "4"}', 4),
        ("Score: **9**", 9),
        ("3", 3),
        ("Rating: 5/10. Good structure, 3 small errors.", 5),
    ],
)
def test_grade_forms(answer: str, grade: float) -> None:
    assert parse_grade(answer) == grade


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("The weather is nice today.", "expected a grade 1-10 like [[7]]"),
        ("", "expected a grade 1-10 like [[7]]"),
        ("Rating: [[11]]", "grade 11 is outside 1-10"),
        ("[[3]] at first, but on reflection [[8]]", "conflicting grades 3, 8"),
        ('{"score": "excellent"}', "score 'excellent'"),
    ],
)
def test_grade_nonsense_is_a_clear_error(answer: str, reason: str) -> None:
    with pytest.raises(JudgeUnparseable, match="judge answered nonsense") as info:
        parse_grade(answer)
    assert reason in str(info.value)
    assert info.value.answer == answer


@pytest.mark.parametrize(
    ("answer", "preference"),
    [
        ("[[A]]", "A"),
        ("After comparing both, my final verdict is [[B]].", "B"),
        ("[[C]]", "tie"),
        ("[[tie]]", "tie"),
        ("Assistant B is better.", "B"),
        ("Response A's answer is better than the other.", "A"),
        ('{"winner": "B"}', "B"),
        ('{"preference": "tie"}', "tie"),
        ("Verdict: A", "A"),
        ("B", "B"),
        ("Both are equally good.", "tie"),
    ],
)
def test_preference_forms(answer: str, preference: str) -> None:
    assert parse_preference(answer) == preference


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("This is a better answer overall.", "expected a verdict like [[A]]"),
        ("[[A]] no wait [[B]]", "it names A and B"),
        ('{"winner": "D"}', "verdict 'D'"),
    ],
)
def test_preference_nonsense_is_a_clear_error(answer: str, reason: str) -> None:
    with pytest.raises(JudgeUnparseable, match="judge answered nonsense") as info:
        parse_preference(answer)
    assert reason in str(info.value)
