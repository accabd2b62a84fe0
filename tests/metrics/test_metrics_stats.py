"""Unit tests of metrics.stats: exact percentiles (numpy's linear method), std, cv, empties."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_slam.metrics.stats import METRICS, Summary, percentile, summarize


def test_percentiles_of_one_to_ten_match_numpy_linear() -> None:
    s = summarize(range(1, 11))
    assert s.count == 10
    assert s.p50 == pytest.approx(5.5)
    assert s.p90 == pytest.approx(9.1)
    assert s.p95 == pytest.approx(9.55)
    assert s.p99 == pytest.approx(9.91)
    assert (s.min, s.max, s.median, s.mean) == (1.0, 10.0, 5.5, 5.5)


def test_std_is_population_and_cv_is_std_over_mean() -> None:
    s = summarize(range(1, 11))
    assert s.std == pytest.approx(math.sqrt(8.25))  # (n^2 - 1) / 12 for 1..n
    assert s.cv == pytest.approx(math.sqrt(8.25) / 5.5)


def test_unsorted_input_with_nones() -> None:
    s = summarize([50, None, 15, 40, None, 20, 35])
    assert s.count == 5
    assert (s.median, s.p90, s.p95, s.p99) == pytest.approx((35, 46, 48, 49.6))


def test_single_value_has_zero_spread() -> None:
    s = summarize([812.4])
    assert (s.count, s.std, s.cv, s.p99, s.min) == (1, 0.0, 0.0, 812.4, 812.4)


def test_empty_and_all_none_give_count_zero_and_none_fields() -> None:
    for values in ([], [None, None]):
        s = summarize(values)
        assert s.count == 0
        assert all(v is None for k, v in s.as_dict().items() if k != "count")


def test_zero_mean_has_no_cv() -> None:
    assert summarize([0, 0, 0]).cv is None


def test_nan_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="pass None for a value that was not measured"):
        summarize([1.0, float("nan")])


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match=r"outside 0\.\.100"):
        percentile([1.0], 101)
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_summary_round_trips_through_json() -> None:
    s = summarize([1, 2, 3])
    data = json.loads(json.dumps(s.as_dict()))
    assert list(data) == list(Summary.FIELDS)
    assert Summary.from_dict(data) == s


def test_metric_names_carry_their_unit_and_a_description() -> None:
    units = ("_ms", "_s", "_tokens", "_usd", "_j", "_per_token", "_w", "_mib", "_pct", "_ratio")
    for name, description in METRICS.items():
        assert name.endswith(units), name
        assert len(description) > 20 and "\n" not in description
    for required in ("ttft_ms", "e2e_ms", "tpot_ms", "tokens_per_s", "cost_usd", "energy_j"):
        assert required in METRICS


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60))
def test_summary_is_ordered_and_bounded(values: list[float]) -> None:
    s = summarize(values)
    tolerance = 1e-6 * (1 + max(abs(v) for v in values))
    chain = [s.min, s.p50, s.p90, s.p95, s.p99, s.max]
    assert all(a <= b + tolerance for a, b in itertools.pairwise(chain))
    assert s.median == s.p50
    assert s.std is not None and s.std >= 0
