"""The review figures: Wilson intervals per model, and kappa against the scorers and the judge."""

from __future__ import annotations

from review_helpers import pair

from pytest_slam.review.agreement import agreement, by_model, wilson
from pytest_slam.review.verdicts import make_verdict


def test_wilson_matches_the_textbook() -> None:
    low, high = wilson(
        8, 10
    )  # Wilson (1927), as in statsmodels proportion_confint(8, 10, "wilson")
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0


def test_kappa_of_each_scorer_with_the_human_label() -> None:
    pairs = [pair("a", "m", 0.9, 0.8), pair("b", "m", 0.3, 0.2), pair("c", "m", 0.8, 0.1),
             pair("d", "m", 0.2, 0.9)]  # fmt: skip
    human = {"a": "win", "b": "loss", "c": "tie", "d": "both_bad"}  # pass, fail, pass, fail
    verdicts = [make_verdict(key=p.key, model="m", answer_hash=p.answer_hash, reference_hash="r",
                             verdict=human[p.key], reviewer="ana") for p in pairs]  # fmt: skip
    got = {a.scorer: a for a in agreement(pairs, verdicts)}
    assert got["fuzzy"].kappa.value == 1.0 and got["fuzzy"].n == 4
    assert got["judge"].kappa.value == 0.0  # right on a and b, wrong on c and d: chance
    assert [(r.model, r.n, r.not_worse) for r in by_model(verdicts)] == [("m", 4, 2)]
