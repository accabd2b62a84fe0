"""The report tests' synthetic outcomes (report_helpers.py) are valid records."""

from __future__ import annotations

from report_helpers import outcomes

from pytest_slam.records import Outcome


def test_synthetic_outcomes_round_trip_through_records() -> None:
    """The helper builds valid records: every outcome survives Outcome.from_dict."""
    for data in outcomes():
        assert Outcome.from_dict(data).as_dict() == data
    assert len(outcomes()) == 12
