"""The one verdict policy (compare/policy.py) and a calibration's domain (compare/domain.py): the
certain cases, the bands held to what they were measured on, the cascade, and each undecided
pair's reason."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_slam.compare.decide import Rule
from pytest_slam.compare.domain import Domain, band_domain_note, domain_unknown, measure_domain
from pytest_slam.compare.policy import Cause, Policy, cause_named, cause_of, decide_pair
from pytest_slam.records import Score

BANDS = Rule(at_least=0.8, fail_below=0.3)
SHORT_QA = {"reference_chars": [8, 310], "length_ratio": [0.1, 4.0], "values": [0.0, 1.0]}
MEASURED = {"band_error": {"pass": 0.039, "pass_upper": 0.047, "domain": SHORT_QA}}


@dataclass
class Known:
    """Evidence with fixed answers, counting what was asked."""

    value: float = 0.9
    judged: float | None = None
    asked: list[str] = field(default_factory=list)
    missing: str | None = None  # why the judge gave nothing

    def score(self) -> Score:
        self.asked.append("score")
        return Score("fuzzy", self.value)

    def judge(self) -> Score | None:
        self.asked.append("judge")
        return None if self.judged is None else Score("judge", self.judged)

    def review(self) -> tuple[str, str] | None:
        return None

    def why_no_judge(self) -> str | None:
        return self.missing


def test_a_judge_that_gave_nothing_says_why_through_the_evidence_interface() -> None:
    """The cascade's reason comes from ``Evidence.why_no_judge``, part of the interface (it read
    an attribute no protocol declared)."""
    said = "the judge never saw this pair (rescore calls no model); cache its verdict"
    evidence = Known(value=0.5, missing=said)
    score = decide_pair(Policy("fuzzy", BANDS, ("judge",)), "Lyon.", "Paris.", evidence)
    assert (score.verdict, score.why_undecided) == ("undecided", said)
    assert evidence.asked == ["score", "judge"]


def test_an_empty_candidate_is_different_with_certainty_and_nothing_is_asked() -> None:
    for empty in ("", "   \n\t"):
        evidence = Known()
        score = decide_pair(Policy("fuzzy"), empty, "Paris.", evidence)
        assert (score.verdict, score.decided_by) == ("different", "empty")
        assert (score.error, score.error_upper) == (0.0, 0.0) and evidence.asked == []


def test_an_empty_reference_decides_nothing_and_says_why() -> None:
    for candidate in ("", "Paris."):
        score = decide_pair(Policy("fuzzy", BANDS), candidate, " ", Known(value=1.0))
        assert (score.verdict, score.decided_by) == ("undecided", None)
        assert score.why_undecided is not None and "golden answer is empty" in score.why_undecided


def test_an_identical_answer_is_exact_and_a_judge_scorer_is_not_asked() -> None:
    evidence = Known()
    policy = Policy("judge", Rule(), ("judge",), {}, asks_model=True)
    score = decide_pair(policy, "Paris.\r\n", "Paris.", evidence)
    assert (score.verdict, score.decided_by, evidence.asked) == ("equivalent", "exact", [])


def test_bands_decide_inside_their_domain_and_carry_their_error() -> None:
    score = decide_pair(Policy("fuzzy", BANDS, (), MEASURED), "It is Paris.", "Paris, France.",
                        Known(0.9))  # fmt: skip
    assert (score.verdict, score.decided_by, score.error_upper) == ("equivalent", "bands", 0.047)


def test_a_pair_outside_the_domain_goes_to_the_judge_or_stays_undecided_saying_why() -> None:
    """A 40-character prefix of a 2,140-character reference scores high on token_set: the short-QA
    bands may not decide it."""
    reference = "word " * 428
    candidate = reference[:40]
    alone = decide_pair(Policy("fuzzy", BANDS, (), MEASURED), candidate, reference, Known(0.93))
    assert (alone.verdict, alone.decided_by) == ("undecided", None)
    assert alone.why_undecided is not None
    assert alone.why_undecided.startswith("outside what the bands were measured on")
    assert "reference 2,139 characters; calibrated on 8-310" in alone.why_undecided
    assert "candidate/reference length 0.02; calibrated on 0.1-4" in alone.why_undecided
    judged = Known(0.93, judged=0.0)
    cascade = Policy("fuzzy", BANDS, ("judge",), MEASURED)
    score = decide_pair(cascade, candidate, reference, judged)
    assert (score.verdict, score.decided_by, judged.asked) == (
        "different",
        "judge",
        ["score", "judge"],
    )


def test_bands_without_a_recorded_domain_decide_as_before_and_are_known_as_such() -> None:
    legacy = {"band_error": {"pass": 0.039, "pass_upper": 0.047}}
    reference = "word " * 428
    score = decide_pair(Policy("fuzzy", BANDS, (), legacy), reference[:40], reference, Known(0.93))
    assert (score.verdict, score.decided_by, score.error_upper) == ("equivalent", "bands", 0.047)
    assert domain_unknown(legacy) and not domain_unknown(MEASURED) and not domain_unknown({})


def test_an_uncertified_judge_leaves_the_pair_undecided_naming_it() -> None:
    measured = {"judge_error": {"pass": 0.2, "pass_upper": 0.3, "pass_certified": False}}
    policy = Policy("fuzzy", BANDS, ("judge",), measured)
    score = decide_pair(policy, "It is Paris.", "Paris, France.", Known(0.5, judged=1.0))
    assert score.verdict == "undecided" and score.why_undecided is not None
    assert "judge's equivalent is not certified" in score.why_undecided
    assert cause_of(score.why_undecided) is Cause.JUDGE_NOT_CERTIFIED
    accepted = Policy("fuzzy", BANDS, ("judge",), measured, accept_uncertified_judge=True)
    assert decide_pair(accepted, "It is Paris.", "Paris, France.",
                       Known(0.5, judged=1.0)).decided_by == "judge"  # fmt: skip


def test_no_evidence_is_said_with_the_bands_between() -> None:
    score = decide_pair(Policy("fuzzy", BANDS, ("judge",)), "It is Paris.", "Paris!", Known(0.5))
    assert score.why_undecided is not None
    assert score.why_undecided.startswith("no evidence: fuzzy 0.50 between the bands (0.30, 0.80)")
    assert cause_of(score.why_undecided) is Cause.NO_EVIDENCE


def test_each_undecided_cause_is_one_enum_member_printed_as_the_report_keeps_it() -> None:
    # the report's undecided_causes keys are the values: older reports read back the same
    assert [c.value for c in Cause][:4] == [
        "no evidence",
        "judge not certified",
        "outside the calibrated features",
        "outside the calibrated domain",
    ]
    assert all(cause_named(c.value) is c and c.fix for c in Cause)
    assert cause_named("a cause of a newer version") is Cause.NO_EVIDENCE
    assert cause_of(None) is Cause.NO_EVIDENCE
    assert cause_of("the judge gave no verdict") is Cause.NO_JUDGE_VERDICT


def test_the_domain_is_the_calibration_pairs_ranges_and_reads_back() -> None:
    domain = measure_domain("labels a.jsonl", ["ab", "abcdef"], ["abcd", "abc"], [0.25, 0.75])
    assert domain.reference_chars == (3, 4) and domain.scope == "labels a.jsonl"
    assert domain.length_ratio == (0.5, 2.0) and domain.values == (0.25, 0.75)
    assert Domain.from_table(domain.as_table()) == domain
    inside = Score("fuzzy", 0.5)
    assert band_domain_note({"domain": domain.as_table()}, "abc", "abcd", inside) is None
    note = band_domain_note({"domain": domain.as_table()}, "abc", "abcdefghij", inside)
    assert note is not None and "reference 10 characters; calibrated on 3-4" in note
