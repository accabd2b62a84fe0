"""The verdict evidence of a model's pairs and the pass rate's interval widened by their errors
(report/evidence.py), on real records: which score decides a pair, and the union bound."""

from __future__ import annotations

import pytest

from pytest_slam.records import Outcome, Pair, Score
from pytest_slam.report.evidence import (
    CERTAIN,
    MEASURED,
    UNMEASURED,
    deciding_score,
    describe,
    evidence_rows,
    unmeasured_pairs,
    widened_interval,
)


def _score(verdict: str, by: str, upper: float | None, rate: float | None = None) -> Score:
    return Score("fuzzy", 1.0, verdict=verdict, decided_by=by, error=rate, error_upper=upper)


def _pair(*scores: Score) -> Pair:
    return Pair(0, "k", "g.json", "ref", scores=list(scores))


def test_an_equivalent_pair_rests_on_its_least_certain_score_a_different_one_on_its_surest() -> (
    None
):
    equivalent = _pair(
        _score("equivalent", "bands", 0.05, 0.02), _score("equivalent", "judge", None)
    )
    assert deciding_score(equivalent).decided_by == "judge"  # all must hold: unmeasured decides
    different = _pair(_score("different", "bands", 0.08), _score("different", "structure", 0.0))
    assert deciding_score(different).decided_by == "structure"  # either fails it: the surest
    assert deciding_score(_pair(_score("undecided", "bands", None))) is None
    rows = evidence_rows([equivalent, different, _pair(_score("equivalent", "bands", 0.05, 0.02))])
    assert [(r.evidence, r.status, r.equivalent, r.different) for r in rows] == [
        ("judge", UNMEASURED, 1, 0), ("structure", CERTAIN, 0, 1), ("bands", MEASURED, 1, 0),
    ]  # fmt: skip
    assert unmeasured_pairs(rows) == 1
    assert describe(rows) == (
        "judge 1 equivalent (unmeasured); structure 1 different (certain); "
        "bands 1 equivalent (pass error 0.020, <= 0.050)"
    )


def test_the_interval_widens_by_the_expected_wrong_passes_and_wrong_fails() -> None:
    outcomes = [
        # passed on two measured equivalent pairs: wrong with probability at most 0.1 + 0.2
        Outcome(
            "t1",
            "t1",
            "m",
            "passed",
            pairs=[
                _pair(_score("equivalent", "bands", 0.1)),
                _pair(_score("equivalent", "bands", 0.2)),
            ],
        ),
        Outcome("t2", "t2", "m", "passed", pairs=[_pair(_score("equivalent", "exact", 0.0))]),
        # failed by the swap alone on a different pair: a wrong fail at most 0.06
        Outcome(
            "t3",
            "t3",
            "m",
            "failed",
            checks_failed=True,
            pairs=[_pair(_score("different", "bands", 0.06))],
        ),
        # failed by its own assertions: no verdict could pass it
        Outcome("t4", "t4", "m", "failed", pairs=[_pair(_score("different", "judge", None))]),
        Outcome("t5", "t5", "m", "skipped"),  # not in the pass rate
    ]
    low, high = widened_interval(0.2, 0.8, outcomes)
    assert low == pytest.approx(0.2 - 0.3 / 4) and high == pytest.approx(0.8 + 0.06 / 4)
    # unmeasured evidence may be wrong on every pair: a whole test's worth, clipped to 0..1
    unmeasured = [
        Outcome("u", "u", "m", "passed", pairs=[_pair(_score("equivalent", "judge", None))])
    ]
    assert widened_interval(0.5, 1.0, unmeasured) == (0.0, 1.0)
    assert widened_interval(None, None, outcomes) == (None, None)
