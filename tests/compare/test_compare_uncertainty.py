"""Paired bootstrap intervals and "A better than B" / "cannot tell apart", on controlled samples."""

from __future__ import annotations

import random

import pytest

from pytest_slam.compare import uncertainty
from pytest_slam.compare.uncertainty import (
    BETTER,
    TIED,
    WORSE,
    compare,
    mean_interval,
    mirrored,
    per_unit,
)


def _noisy(seed: int, shift: float, n: int = 40) -> dict[str, float]:
    rng = random.Random(seed)
    return {f"req{i}": min(1.0, max(0.0, 0.5 + shift + rng.gauss(0, 0.15))) for i in range(n)}


def test_interval_holds_the_mean_and_is_deterministic() -> None:
    values = _noisy(1, 0.0)
    first = mean_interval(values)
    assert first is not None and first.low < first.mean < first.high and first.n == 40
    assert mean_interval(dict(reversed(list(values.items())))) == first  # order does not matter


def test_interval_narrows_with_more_requests() -> None:
    small, large = mean_interval(_noisy(2, 0.0, 10)), mean_interval(_noisy(2, 0.0, 400))
    assert small is not None and large is not None
    assert large.high - large.low < (small.high - small.low) / 3


def test_edge_cases() -> None:
    assert mean_interval({}) is None
    one = mean_interval({"only": 0.7})
    assert one is not None and (one.low, one.high, one.n) == (0.7, 0.7, 1)
    assert compare("a", {"x": 1.0}, "b", {"y": 0.0}) is None  # nothing shared
    assert compare("a", {"x": 1.0}, "b", {"x": 0.0}).outcome == TIED  # one unit decides nothing


def test_a_real_gap_is_told_apart_and_sameness_is_not() -> None:
    base = _noisy(3, 0.0)
    better = {k: min(1.0, v + 0.1) for k, v in base.items()}
    assert compare("A", better, "B", base).outcome == BETTER
    assert compare("B", base, "A", better).outcome == WORSE
    same = compare("A", base, "B", dict(base))
    assert same.outcome == TIED and same.diff.mean == 0
    assert "cannot tell apart" in same.describe()


def test_pairing_sees_a_gap_that_unpaired_intervals_hide() -> None:
    base = _noisy(4, 0.0)  # large request-to-request spread
    better = {k: v + 0.03 for k, v in base.items()}  # small, consistent gain
    a, b = mean_interval(better), mean_interval(base)
    assert a is not None and b is not None and a.low < b.high  # the two intervals overlap
    assert compare("A", better, "B", base).outcome == BETTER  # the paired difference does not


def test_per_unit_averages_repeats_and_drops_missing() -> None:
    items = [("k1", 1.0), ("k1", 0.0), ("k2", None), (None, 1.0), ("k3", 0.25)]
    assert per_unit(items) == {"k1": 0.5, "k3": 0.25}


def test_many_units_use_the_normal_interval_which_matches_the_bootstrap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = _noisy(5, 0.0, 400)
    fast = mean_interval(values)
    monkeypatch.setattr(uncertainty, "NORMAL_FROM", 10**9)
    slow = mean_interval(values)
    assert fast is not None and slow is not None
    assert fast.low == pytest.approx(slow.low, abs=0.004)
    assert fast.high == pytest.approx(slow.high, abs=0.004)


def test_a_worse_candidate_reads_from_the_better_side() -> None:
    base = _noisy(6, 0.0)
    worse = {k: max(0.0, v - 0.2) for k, v in base.items()}
    found = compare("A", worse, "B", base)
    assert found.outcome == WORSE
    assert found.describe().startswith("B better than A on equivalence (+0.")
    back = mirrored(found)
    assert (back.a, back.b, back.outcome) == ("B", "A", BETTER)
    assert back.diff.low == -found.diff.high
