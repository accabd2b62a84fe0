"""How each pair's verdict was reached, with the error measured for that evidence, and the pass
rate's interval widened by those errors (issue 28).

Each decided score carries ``error`` and ``error_upper`` (``run/score/checks.py`` sets them from
``compare/decide.verdict_error``): 0 for certain evidence (an identical answer, a structural
comparison, a person's review), the measured error and its 95% upper bound for calibrated bands or
a measured judge, None for evidence nobody measured (a hand-set threshold, bands or a judge with no
``band_error``/``judge_error``). A pair is decided by the score that decides it: for an equivalent
pair the least certain of its scores (all must hold), for a different pair the most certain one.

The widened pass rate interval is a union bound on top of the sampling interval: each passed
test could be a wrong pass with probability at most the sum of its equivalent pairs' upper pass
errors (capped at 1); each test the swap's checks alone failed could be a wrong fail with
probability at most the smallest upper fail error among its different pairs. Unmeasured evidence
counts as 1 (it may be wrong on every pair). The low end moves down by the expected wrong passes
over the tests, the high end up by the expected wrong fails: ``[low - P/n, high + F/n]``, clipped
to 0..1. Undecided pairs decide no test outcome and are gated on their own (``allow_undecided``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_slam.records import Outcome, Pair, Record, Score

CERTAIN, MEASURED, UNMEASURED = "certain", "measured", "unmeasured"
DECIDED = ("equivalent", "different")
COUNTED = ("passed", "failed", "error", "candidate_failed")  # the pass rate's tests


@dataclass
class EvidenceRow(Record):
    """One evidence's share of a model's decided pairs, with its measured errors."""

    evidence: str  # a Score.decided_by: exact, structure, threshold, bands, judge, review
    status: str  # certain | measured | unmeasured
    equivalent: int = 0
    different: int = 0
    # the largest error (and 95% upper bound) among its pairs, by verdict; None: unmeasured
    pass_error: float | None = None
    pass_error_upper: float | None = None
    fail_error: float | None = None
    fail_error_upper: float | None = None


def deciding_score(pair: Pair) -> Score | None:
    """The score that decided the pair's verdict (None when it has no decided verdict)."""
    verdict = pair.verdict
    if verdict not in DECIDED:
        return None
    found = [s for s in pair.scores if s.verdict == verdict]
    if verdict == "equivalent":  # every score holds: the least certain one is the pair's
        return max(found, key=_upper)
    return min(found, key=_upper)  # any different score fails it: the most certain one


def _upper(score: Score) -> float:
    return 1.0 if score.error_upper is None else score.error_upper


def status_of(score: Score) -> str:
    if score.error_upper is None:
        return UNMEASURED
    return CERTAIN if score.error_upper == 0 else MEASURED


def evidence_rows(pairs: Iterable[Pair]) -> list[EvidenceRow]:
    """Decided pairs by the evidence that decided them, in order of first appearance."""
    rows: dict[tuple[str, str], EvidenceRow] = {}
    for pair in pairs:
        score = deciding_score(pair)
        if score is None or pair.missing:
            continue
        evidence = score.decided_by or "unknown"
        status = status_of(score)
        row = rows.setdefault((evidence, status), EvidenceRow(evidence, status))
        side = "pass" if pair.verdict == "equivalent" else "fail"
        if side == "pass":
            row.equivalent += 1
        else:
            row.different += 1
        if score.error_upper is not None:
            _keep_worst(row, side, score)
    return list(rows.values())


def _keep_worst(row: EvidenceRow, side: str, score: Score) -> None:
    upper = getattr(row, f"{side}_error_upper")
    if upper is None or (score.error_upper or 0.0) > upper:
        setattr(row, f"{side}_error", score.error)
        setattr(row, f"{side}_error_upper", score.error_upper)


def unmeasured_pairs(rows: Iterable[EvidenceRow]) -> int:
    """Decided pairs whose evidence has no measured error (the gate's ``max_unmeasured``)."""
    return sum(r.equivalent + r.different for r in rows if r.status == UNMEASURED)


def widened_interval(
    low: float | None, high: float | None, outcomes: list[Outcome]
) -> tuple[float | None, float | None]:
    """The pass rate's sampling interval widened by its tests' verdict errors (module doc)."""
    ran = [o for o in outcomes if o.outcome in COUNTED]
    if low is None or high is None or not ran:
        return None, None
    wrong_pass = sum(_wrong_pass(o) for o in ran if o.outcome == "passed")
    wrong_fail = sum(_wrong_fail(o) for o in ran if o.outcome == "failed")
    return max(0.0, low - wrong_pass / len(ran)), min(1.0, high + wrong_fail / len(ran))


def _wrong_pass(outcome: Outcome) -> float:
    """At most the chance that one of the test's equivalent pairs was really different."""
    scores = [deciding_score(p) for p in outcome.pairs if p.verdict == "equivalent"]
    return min(1.0, sum(_upper(s) for s in scores if s is not None))


def _wrong_fail(outcome: Outcome) -> float:
    """At most the chance that every different pair of a test the swap alone failed was wrong."""
    if not outcome.checks_failed or outcome.budget_breaches:
        return 0.0
    if any(p.missing for p in outcome.pairs):
        return 0.0
    scores = [deciding_score(p) for p in outcome.pairs if p.verdict == "different"]
    found = [_upper(s) for s in scores if s is not None]
    return min(found) if found else 0.0


def describe(rows: Iterable[EvidenceRow]) -> str:
    """``bands 2 equivalent, 1 different (pass error 0.030, <= 0.070; fail error 0.020, <=
    0.040); judge 1 equivalent (unmeasured)``: every surface says it this way."""
    return "; ".join(f"{r.evidence} {_counts(r)} ({_errors(r)})" for r in rows)


def _counts(row: EvidenceRow) -> str:
    said = [f"{row.equivalent} equivalent" if row.equivalent else "", ""]
    said[1] = f"{row.different} different" if row.different else ""
    return ", ".join(s for s in said if s)


def _errors(row: EvidenceRow) -> str:
    if row.status != MEASURED:
        return row.status
    said = []
    for side, count in (("pass", row.equivalent), ("fail", row.different)):
        upper = getattr(row, f"{side}_error_upper")
        if not count:
            continue
        if upper is None:
            said.append(f"{side} error unmeasured")
            continue
        rate = getattr(row, f"{side}_error")
        shown = f"{rate:.3f}, " if rate is not None else ""
        said.append(f"{side} error {shown}<= {upper:.3f}")
    return "; ".join(said)
