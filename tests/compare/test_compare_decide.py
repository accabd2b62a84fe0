"""Which evidence decides a score (compare/decide.py): structure, the judge's scale, a threshold,
calibrated bands, or nothing."""

from __future__ import annotations

import pytest

from pytest_slam.compare.bands import Bands
from pytest_slam.compare.decide import Rule, is_structural
from pytest_slam.records import Score


def _decide(rule: Rule, scorer: str, value: float) -> tuple[str | None, str | None]:
    score = rule.apply(Score(scorer, value))
    return score.verdict, score.decided_by


def test_similarity_without_bands_has_no_verdict() -> None:
    score = Rule().apply(Score("fuzzy", 0.99))
    assert (score.verdict, score.decided_by, score.passed, score.threshold) == (
        None, None, None, None,
    )  # fmt: skip


def test_a_threshold_alone_gives_two_outcomes_and_bands_three() -> None:
    threshold = Rule(at_least=0.7)
    assert _decide(threshold, "fuzzy", 0.7) == ("equivalent", "threshold")
    assert _decide(threshold, "fuzzy", 0.4) == ("different", "threshold")
    bands = Rule(at_least=0.8, fail_below=0.3)
    assert _decide(bands, "semantic", 0.85) == ("equivalent", "bands")
    assert _decide(bands, "semantic", 0.5) == ("undecided", "bands")
    assert _decide(bands, "semantic", 0.29) == ("different", "bands")
    assert Rule(at_least=0.8, fail_below=0.3).apply(Score("fuzzy", 0.5)).passed is None


def test_a_fail_band_alone_calls_pairs_different_or_undecided_never_equivalent() -> None:
    """Long answers: low similarity to the reference means worse, high similarity proves nothing."""
    fail_only = Rule(fail_below=0.55)
    assert _decide(fail_only, "fuzzy", 0.54) == ("different", "bands")
    assert _decide(fail_only, "fuzzy", 0.55) == ("undecided", "bands")
    assert _decide(fail_only, "fuzzy", 1.0) == ("undecided", "bands")
    with pytest.raises(ValueError, match="fail band must lie below"):
        Bands(at_least=0.5, fail_below=0.6)


@pytest.mark.parametrize("scorer", ["exact", "normalized", "json", "json_schema", "label",
                                    "tool_calls", "tool_calls+json", "json+json_schema"])  # fmt: skip
def test_structural_scorers_decide_at_structural_equality_by_default(scorer: str) -> None:
    assert is_structural(scorer)
    assert _decide(Rule(), scorer, 1.0) == ("equivalent", "structure")
    assert _decide(Rule(), scorer, 0.99) == ("different", "structure")
    assert _decide(Rule(at_least=0.5), scorer, 0.6) == ("equivalent", "structure")


def test_a_mixed_score_is_decided_as_similarity() -> None:
    assert not is_structural("tool_calls+fuzzy")
    assert _decide(Rule(), "tool_calls+fuzzy", 1.0) == (None, None)


def test_the_judge_decides_by_its_own_scale() -> None:
    grade_7, grade_6 = (7 - 1) / 9, (6 - 1) / 9
    assert _decide(Rule(), "judge", grade_7) == ("equivalent", "judge")
    assert _decide(Rule(), "judge", grade_6) == ("different", "judge")
    assert _decide(Rule(judge_mode="pairwise"), "judge", 0.5) == ("equivalent", "judge")
    assert _decide(Rule(judge_mode="pairwise"), "judge", 0.25) == ("different", "judge")
    assert _decide(Rule(at_least=0.9), "judge", grade_7) == ("different", "judge")
