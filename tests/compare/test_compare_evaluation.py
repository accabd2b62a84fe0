"""``slam calibrate --evaluate``'s scopes: the top-level table updated by a module's, as the run does."""

from __future__ import annotations

import pytest

from pytest_slam.compare.bands import Bands
from pytest_slam.compare.calibrate import CalibrationRefused, LabelledPair
from pytest_slam.compare.evaluation import evaluate, scope_of

TABLE = {
    "by": "fuzzy", "method": "token_sort_ratio", "at_least": 0.8, "fail_below": 0.0,
    "then": ["judge"],
    "modules": {"tests/test_a.py": {"by": "semantic", "at_least": 0.9, "fail_below": 0.5},
                "tests/test_b.py": {"method": "ratio", "at_least": 0.9, "fail_below": 0.4}},
}  # fmt: skip


def test_a_module_table_updates_the_top_level_and_another_scorer_starts_fresh() -> None:
    top = scope_of(TABLE, "tests/test_other.py")
    assert (top.by, top.options) == ("fuzzy", {"method": "token_sort_ratio"})
    assert top.bands == Bands(0.8, 0.0)
    b = scope_of(TABLE, "tests/test_b.py")
    assert (b.by, b.options, b.bands) == ("fuzzy", {"method": "ratio"}, Bands(0.9, 0.4))
    a = scope_of(TABLE, "tests/test_a.py")  # no fuzzy `method` handed to the semantic scorer
    assert (a.by, a.options, a.bands) == ("semantic", {}, Bands(0.9, 0.5))


def test_a_module_with_another_scorer_or_bands_drops_the_error_measured_for_the_top_bands() -> None:
    error = {"pass": 0.01, "fail": 0.02, "n": 900, "domain": {"values": [0.2, 0.99]}}
    table = {"by": "fuzzy", "at_least": 0.8, "fail_below": 0.4, "band_error": error,
             "modules": {"tests/test_s.py": {"by": "semantic"},
                         "tests/test_b.py": {"at_least": 0.9}}}  # fmt: skip
    assert scope_of(table, "tests/test_y.py").band_error == error
    semantic = scope_of(table, "tests/test_s.py")  # no bands of its own: none decide
    assert (semantic.band_error, semantic.bands) == (None, Bands(None, None))
    moved = scope_of(table, "tests/test_b.py")  # its own bands were never measured
    assert (moved.band_error, moved.bands) == (None, Bands(0.9, 0.4))


def test_counts_and_errors_are_shares_of_the_pairs_called() -> None:
    pairs = [LabelledPair(str(i), c, "the cat sat on the mat", y, y) for i, (c, y) in enumerate(
        [("the cat sat on the mat", 1), ("the cat sat on a mat", 0), ("dogs bark", 1),
         ("dogs bark loudly", 0), ("the cat sat", 1)])]  # fmt: skip
    result = evaluate(pairs, {"by": "fuzzy", "at_least": 0.85, "fail_below": 0.3})  # 1.0, 0.86 in
    assert (result["equivalent"], result["different"], result["undecided"]) == (2, 2, 1)
    assert result["pass_error"]["wrong"] == 1 and result["pass_error"]["value"] == 0.5
    assert result["fail_error"]["wrong"] == 1 and result["fail_error"]["of"] == 2
    assert 0 < result["pass_error"]["low"] < 0.5 < result["pass_error"]["high"] < 1
    with pytest.raises(CalibrationRefused, match=r"fail_below \(0.7\) is above at_least"):
        evaluate(pairs, {"at_least": 0.5, "fail_below": 0.7})
