"""The agreement measures behind the validity benchmark and ``slam calibrate``, on cases worked by hand."""

from __future__ import annotations

import math
import random

import pytest

from pytest_slam.compare.combined import features, fit
from pytest_slam.compare.validity import (
    auc,
    best_threshold,
    bootstrap_measure,
    cohen_kappa,
    false_pass_rate,
    grouped_bootstrap,
    spearman,
    verdicts,
)


def test_kappa_counts_only_agreement_beyond_chance() -> None:
    labels = [1, 1, 0, 0]
    assert cohen_kappa([1, 1, 0, 0], labels) == 1.0
    assert cohen_kappa([0, 0, 1, 1], labels) == -1.0
    assert cohen_kappa([1, 1, 1, 1], labels) == 0.0  # always "pass" agrees half the time: chance
    # the textbook case: 20 yes-yes, 5 yes-no, 10 no-yes, 15 no-no -> kappa 0.4
    a = [1] * 25 + [0] * 25
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_false_pass_rate_is_the_share_of_bad_answers_let_through() -> None:
    assert false_pass_rate([1, 0, 1, 1], [1, 0, 0, 0]) == pytest.approx(2 / 3)
    assert math.isnan(false_pass_rate([1], [1]))  # no bad answer to let through


def test_auc_and_spearman_on_known_orders() -> None:
    assert auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert auc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    assert auc([0.5, 0.5, 0.5, 0.5], [0, 1, 0, 1]) == 0.5  # ties count half
    xs = [0.3, 0.1, 0.7, 0.4]
    assert spearman(xs, [x**3 for x in xs]) == pytest.approx(1.0)  # any monotone map
    assert spearman(xs, [-x for x in xs]) == pytest.approx(-1.0)


def test_best_threshold_separates_what_can_be_separated() -> None:
    scores = [0.2, 0.3, 0.45, 0.62, 0.7, 0.9]
    labels = [0, 0, 0, 1, 1, 1]
    t = best_threshold(scores, labels)
    assert 0.45 < t <= 0.62
    assert cohen_kappa(verdicts(scores, t), labels) == 1.0


def test_grouped_bootstrap_resamples_whole_prompts_deterministically() -> None:
    groups = [str(i // 5) for i in range(100)]  # 20 prompts of 5 pairs
    values = [float(i // 5 % 2) for i in range(100)]  # a prompt's pairs all agree

    def mean(ix: list[int]) -> float:
        return sum(values[i] for i in ix) / len(ix)

    first = grouped_bootstrap(groups, mean, resamples=300, seed=3)
    assert first == grouped_bootstrap(groups, mean, resamples=300, seed=3)
    assert first.value == 0.5 and first.low < 0.5 < first.high
    # 20 independent units, not 100: the interval is as wide as 20 coin flips give (about +-0.22)
    assert first.high - first.low > 0.3


def test_bootstrap_measure_hands_the_measure_the_same_rows_of_every_column() -> None:
    groups = [str(i // 2) for i in range(40)]  # 20 prompts of 2 pairs
    scores = [(i % 7) / 7 for i in range(40)]
    labels = [int(s > 0.4) for s in scores]
    got = bootstrap_measure(groups, auc, scores, labels, resamples=200, seed=1)
    assert got.value == auc(scores, labels) == 1.0
    by_hand = grouped_bootstrap(
        groups, lambda ix: auc([scores[i] for i in ix], [labels[i] for i in ix]), 200, seed=1
    )
    assert got == by_hand and got.low == got.high == 1.0  # rows never mismatched across columns


def test_combined_model_learns_the_informative_feature() -> None:
    rng = random.Random(0)
    rows, labels = [], []
    for _ in range(300):
        good = rng.random() < 0.4
        signal = rng.gauss(0.7 if good else 0.4, 0.1)
        rows.append([signal, rng.random(), rng.random(), rng.random(), rng.gauss(0, 1)])
        labels.append(int(good))
    model = fit(rows, labels)
    assert model.weights[0] > 1.0 and all(abs(w) < 0.5 for w in model.weights[1:])
    probs = [model.probability(r) for r in rows]
    assert auc(probs, labels) > 0.9
    assert set(model.as_dict()) == {"names", "weights", "bias", "mean", "scale"}


def test_features_of_a_pair() -> None:
    same = features("The cat sat on the mat.", "the cat sat on the mat")
    assert same[:4] == [1.0, 1.0, 1.0, pytest.approx(22 / 23)]
    longer = features("a " * 50, "a b")
    assert longer[4] > 0  # log length ratio: the candidate is longer
