"""Band selection (Learn then Test) and the exact binomial figures behind it, on cases worked by hand
and on simulated labels whose true error is known."""

from __future__ import annotations

import math
import random

import pytest

from pytest_slam.compare.bandselect import Targets, certify, choose_bands, sequence_start
from pytest_slam.compare.binomial import interval, lower_tail, upper_bound


def test_binomial_tail_and_clopper_pearson_match_closed_forms() -> None:
    assert lower_tail(0, 20, 0.05) == pytest.approx(0.95**20)
    assert lower_tail(1, 3, 0.5) == pytest.approx(0.5)  # 1/8 + 3/8
    assert lower_tail(2500, 5000, 0.5) == pytest.approx(0.5056, abs=1e-3)  # large n, no overflow
    # k = 0: the one-sided upper bound solves (1 - p)^n = 0.05 exactly
    assert upper_bound(0, 10) == pytest.approx(1 - 0.05 ** (1 / 10), abs=1e-9)
    low, high = interval(0, 10)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-9)
    low, high = interval(5, 10)  # symmetric around 0.5, the textbook [0.187, 0.813]
    assert low == pytest.approx(0.1871, abs=1e-4) and high == pytest.approx(0.8129, abs=1e-4)
    assert interval(0, 0) == (0.0, 1.0)


def test_fixed_sequence_stops_at_the_first_threshold_it_cannot_reject() -> None:
    steps = [(0.9, 400, 0), (0.8, 600, 2), (0.7, 800, 200), (0.6, 1000, 2)]
    # 0.6 would pass on its own, but the sequence ended at 0.7: it is not certified
    assert certify(steps, 0.05, 0.05, start=100) == 0.8
    assert certify(steps, 0.05, 0.05, start=700) is None  # 0.7 is the first tested: rejected not
    assert certify([(0.9, 50, 0), *steps], 0.05, 0.05, start=100) == 0.8  # too small: not tested


def bands_data(n: int, seed: int) -> tuple[list[float], list[int]]:
    """High scores (>= 0.8) almost always acceptable (1% bad), low ones (< 0.3) almost never
    (3% acceptable), between: a coin."""
    rng = random.Random(seed)
    scores, labels = [], []
    for _ in range(n):
        s = rng.random()
        p_good = 0.99 if s >= 0.8 else 0.03 if s < 0.3 else 0.5
        scores.append(round(s, 3))
        labels.append(int(rng.random() < p_good))
    return scores, labels


def test_clear_bands_are_found_and_the_middle_left_undecided() -> None:
    scores, labels = bands_data(4000, 0)
    choice = choose_bands("fuzzy", scores, labels, Targets())
    # the widest bands whose true error is at the target: pass >= 0.782, fail < 0.3525
    assert choice.at_least is not None and 0.782 <= choice.at_least <= 0.85
    assert choice.fail_below is not None and 0.27 <= choice.fail_below <= 0.3525
    assert choice.passed.rate <= 0.05 and choice.failed.rate <= 0.10
    assert 0.45 < choice.coverage < 0.62  # the coin in the middle is undecided


def test_a_band_that_cannot_be_certified_is_not_set() -> None:
    scores, _ = bands_data(4000, 1)
    noisy = [int(random.Random(i).random() < 0.8) for i in range(len(scores))]  # labels are noise
    choice = choose_bands("fuzzy", scores, noisy, Targets())
    assert (choice.at_least, choice.fail_below, choice.decided) == (None, None, 0)
    # a pass band but no fail band: nothing is called different (fail_below 0.0), not "all below"
    all_good_above = [1 if s >= 0.5 else int(random.Random(i).random() < 0.6)
                      for i, s in enumerate(scores)]  # fmt: skip
    choice = choose_bands("fuzzy", scores, all_good_above, Targets())
    assert choice.at_least is not None and choice.fail_below == 0.0 and choice.failed.called == 0


@pytest.mark.parametrize(("alpha", "scorers"), [(0.05, 1), (0.10, 1), (0.05, 5), (0.10, 5)])
def test_a_band_needs_the_exact_smallest_count_its_rule_allows(alpha: float, scorers: int) -> None:
    """Every count below the start fails the rule (a band at half the target error would not be
    certified), the start meets it: no step grid (233 was printed where 230 meets the rule)."""
    level = 0.05 / (2 * scorers)
    start = sequence_start(alpha, level, 20)

    def meets(n: int) -> bool:
        return lower_tail(math.floor(n * alpha / 2), n, alpha) <= level

    assert meets(start) and not any(meets(n) for n in range(20, start))
    assert (sequence_start(0.05, 0.025, 20), sequence_start(0.10, 0.025, 20)) == (230, 114)


def test_too_few_pairs_certify_nothing_however_clean() -> None:
    assert sequence_start(0.05, 0.05 / 2, 20) > 59  # zero errors need 59 pairs at 95% alone
    scores = [0.9] * 40 + [0.1] * 40
    labels = [1] * 40 + [0] * 40
    assert choose_bands("fuzzy", scores, labels, Targets()).at_least is None


def test_the_guarantee_holds_on_simulated_projects() -> None:
    """Bands chosen on 200 simulated label sets: a certified pass band whose true error is above
    5% happens in at most about 5% of them (here far fewer: the method is conservative)."""
    true_error = {}  # threshold -> population pass error of bands_data, by integration
    for t in (i / 100 for i in range(101)):
        lo = max(t, 0.0)
        bad = sum(w * q for a, b, q in ((0.0, 0.3, 0.97), (0.3, 0.8, 0.5), (0.8, 1.0, 0.01))
                  if (w := max(0.0, b - max(a, lo))) > 0)  # fmt: skip
        true_error[round(t, 2)] = bad / (1 - lo) if lo < 1 else 0.01
    misses = 0
    for seed in range(200):
        scores, labels = bands_data(1500, seed + 100)
        choice = choose_bands("fuzzy", scores, labels, Targets())
        if choice.at_least is not None and true_error[choice.at_least] > 0.05:
            misses += 1
    assert misses <= 10, f"{misses} of 200 certified pass bands have a true error above 5%"
    assert not math.isnan(true_error[0.8]) and true_error[0.8] == pytest.approx(0.01)


def test_a_fail_band_stands_alone_where_no_pass_band_holds() -> None:
    """Long open-ended answers: high similarity is a coin, low similarity means a worse answer."""
    rng = random.Random(3)
    scores = [round(rng.random(), 3) for _ in range(4000)]
    labels = [int(rng.random() < (0.03 if s < 0.3 else 0.5)) for s in scores]
    choice = choose_bands("fuzzy", scores, labels, Targets())
    assert choice.at_least is None and choice.passed.called == 0
    assert choice.fail_below is not None and 0.2 <= choice.fail_below <= 0.35
    assert choice.failed.rate <= 0.10 and 0.2 < choice.coverage < 0.36
    assert choose_bands("fuzzy", scores, labels, Targets(), fail_alone=False).decided == 0
