"""Audits while in use (compare/audit.py, issue 50 item 2): a stated error re-tested on a feature's
audit labels with a sequential probability ratio test; a bound they contradict is withdrawn after
the audits the test needs, one they agree with stays. Labels are generated here, seeded."""

from __future__ import annotations

import math
import random

from pytest_slam.compare.audit import (
    ALPHA,
    Audited,
    contradicts,
    expected_audits,
    fewest_audits,
    findings,
    withdrawals,
)
from pytest_slam.compare.decide import Rule
from pytest_slam.compare.policy import Cause, Policy, cause_of, decide_pair
from pytest_slam.records import Score

STATED = 0.044  # short-QA bands' pass_upper (issue 50: "error 0.036 (<= 0.044)")
MEASURED = {"band_error": {"pass": 0.036, "pass_upper": STATED, "fail": 0.05, "fail_upper": 0.09}}


def audits(true_error: float, n: int, seed: int, verdict: str = "equivalent") -> list[Audited]:
    """``n`` audits of the bands' ``verdict`` verdicts, each wrong with chance ``true_error``."""
    rng = random.Random(seed)
    right = 1 if verdict == "equivalent" else 0
    return [
        Audited("band_error", verdict, STATED, 1 - right if rng.random() < true_error else right)
        for _ in range(n)
    ]


def withdrawn_after(stream: list[Audited]) -> int | None:
    """The number of audits after which the bound is first withdrawn, looked at after each one
    (None: never)."""
    errors = 0
    for n, audit in enumerate(stream, 1):
        errors += audit.wrong
        if contradicts(errors, n, STATED):
            return n
    return None


class Known:
    """Evidence with fixed answers: the bands' score, no judge, no review."""

    def __init__(self, value: float) -> None:
        self.value = value

    def score(self) -> Score:
        return Score("fuzzy", self.value)

    def judge(self) -> Score | None:
        return None

    def review(self) -> tuple[str, str] | None:
        return None

    def why_no_judge(self) -> str | None:
        return None


def test_the_count_the_sequential_test_needs_is_stated() -> None:
    # three errors in three audits withdraw a bound of 0.044 (ratio 3^3 = 27 >= 1/alpha = 20);
    # two do not; at the 0.30 short-QA bands showed on MT-Bench, about 11 audits on average
    assert fewest_audits(STATED) == 3
    assert contradicts(3, 3, STATED) and not contradicts(2, 2, STATED)
    assert 10 < expected_audits(STATED, 0.30) < 12
    assert expected_audits(STATED, STATED) == math.inf  # at the bound it never climbs on average
    # the wording's example: 4 errors in 20 against a stated 0.035 is a contradiction
    assert contradicts(4, 20, 0.035) and not contradicts(3, 20, 0.035)


def test_bands_the_audits_contradict_are_withdrawn_after_the_audits_the_test_needs() -> None:
    stream = audits(0.30, 60, seed=7)
    after = withdrawn_after(stream)
    assert after is not None and fewest_audits(STATED) <= after <= 30
    errors = sum(a.wrong for a in stream[:after])
    # withdrawn exactly when the ratio reached 1/alpha, and not one audit before
    assert contradicts(errors, after, STATED)
    assert not withdrawals(stream[: after - 1], MEASURED)
    why = withdrawals(stream[:after], MEASURED)[("band_error", "equivalent")]
    assert why.startswith(
        f"withdrawn by audits: the bands' equivalent verdicts on this feature: audits found "
        f"{errors} error(s) in {after}, stated error 0.036 (<= 0.044); a sequential test (SPRT, "
        f"error 0.132 against 0.044, alpha 0.05) rejects it; recalibrate with the audit labels"
    )


def test_bands_the_audits_agree_with_stay() -> None:
    for seed in range(20):  # an error below the bound: 200 audits each, never withdrawn
        stream = audits(0.02, 200, seed)
        assert withdrawn_after(stream) is None and withdrawals(stream, MEASURED) == {}


def test_a_bound_that_holds_is_withdrawn_at_most_alpha_of_the_time_however_long_audited() -> None:
    # Ville's inequality: at an error right at the bound, the share of streams ever withdrawn
    # in 300 audits, each looked at after every audit, stays under alpha (no alpha spending)
    streams = 400
    withdrawn = 0
    for seed in range(streams):
        rng = random.Random(seed)
        errors = 0
        for n in range(1, 301):
            errors += rng.random() < STATED
            if contradicts(errors, n, STATED):
                withdrawn += 1
                break
    assert withdrawn / streams <= ALPHA


def test_a_withdrawn_side_leaves_its_pairs_undecided_naming_the_cause_and_the_fix() -> None:
    bands = Rule(at_least=0.8, fail_below=0.3)
    withdrawn = withdrawals(audits(1.0, 3, seed=0), MEASURED)
    policy = Policy("fuzzy", bands, (), MEASURED, module="tests/test_qa.py", withdrawn=withdrawn)
    passed = decide_pair(policy, "It is Paris.", "Paris, France.", Known(0.9))
    assert (passed.verdict, passed.decided_by) == ("undecided", None)
    assert cause_of(passed.why_undecided) is Cause.WITHDRAWN_BY_AUDITS
    assert "audits found 3 error(s) in 3" in (passed.why_undecided or "")
    assert Cause.WITHDRAWN_BY_AUDITS.fix.startswith("recalibrate with the audit labels")
    # the fail band was not audited: it still decides, with its stated error
    failed = decide_pair(policy, "No idea at all.", "Paris, France.", Known(0.1))
    assert (failed.verdict, failed.decided_by, failed.error_upper) == ("different", "bands", 0.09)
    # an identical answer is certain whatever the audits say of the bands
    same = decide_pair(policy, "Paris, France.", "Paris, France.", Known(1.0))
    assert (same.verdict, same.decided_by) == ("equivalent", "exact")


def test_audits_of_an_older_bound_test_nothing_now() -> None:
    old = [Audited("band_error", "equivalent", 0.2, 0) for _ in range(5)]
    assert findings(old, MEASURED) == [] and withdrawals(old, MEASURED) == {}


class Judged(Known):
    """Between the bands; the judge calls the pair equivalent."""

    def judge(self) -> Score | None:
        return Score("judge", 1.0)


def test_audits_withdraw_a_judges_side_too_and_the_pair_says_so() -> None:
    measured = {"judge_error": {"pass": 0.02, "pass_upper": 0.05}}
    wrong = [Audited("judge_error", "equivalent", 0.05, 0) for _ in range(3)]
    policy = Policy("fuzzy", Rule(at_least=0.8, fail_below=0.3), ("judge",), measured)
    kept = decide_pair(policy, "It is Paris.", "Paris, France.", Judged(0.5))
    assert (kept.verdict, kept.decided_by, kept.error_upper) == ("equivalent", "judge", 0.05)
    policy = Policy("fuzzy", Rule(at_least=0.8, fail_below=0.3), ("judge",), measured,
                    withdrawn=withdrawals(wrong, measured))  # fmt: skip
    score = decide_pair(policy, "It is Paris.", "Paris, France.", Judged(0.5))
    assert (score.verdict, score.decided_by) == ("undecided", None)
    assert (score.why_undecided or "").startswith(
        "withdrawn by audits: the judge's equivalent verdicts"
    )
