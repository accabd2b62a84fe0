"""The one verdict policy: how one pair is decided from its plan, its answers and its evidence.

A run (``run/score/checks.py``), ``slam rescore`` (the run's checks again) and ``slam calibrate
--evaluate`` (``evaluation.py``) all call :func:`decide_pair`, so the error calibration measures
is the error of the verdicts a run gives, by construction. The rungs, cheapest and most certain
first:

1. **certain cases**: an empty golden answer decides nothing (flagged; re-record it); an empty or
   whitespace-only candidate against a non-empty reference is different ("empty", certain); an
   answer identical to the reference (``decide.identical``) is equivalent ("exact", certain; a
   scorer that asks a model is not asked).
2. **the configured scorer** and its rule (``decide.Rule``: structure, a threshold, bands). Bands
   decide only on their measured domain (``domain.py``): a pair outside it goes on down. A
   stated error that the feature's audits contradict (``audit.py``) is withdrawn: the bands (or
   the judge) decide nothing on that side for that feature until calibrated again.
3. **the cascade** (``then``): the judge, whose side that ``--evaluate`` could not certify decides
   nothing unless accepted, then a person's stored review.

An undecided pair carries ``why_undecided``: the cause (no evidence, the judge not certified, the
judge unread or not cached, outside the calibrated features or domain, withdrawn by audits:
:class:`Cause`) and its fix. The evidence is asked for
lazily (:class:`Evidence`): a judge is asked only about a pair the cheaper rungs left undecided.
"""

from __future__ import annotations

import enum
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pytest_slam.compare.audit import WITHDRAWN_OPENING
from pytest_slam.compare.bands import DIFFERENT, EQUIVALENT, UNDECIDED
from pytest_slam.compare.decide import (
    EXACT,
    IDENTICAL,
    MEASURED_KEYS,
    Rule,
    identical,
    uncertified,
    verdict_error,
)
from pytest_slam.compare.domain import band_domain_note, outside_features
from pytest_slam.records import Score

OUTSIDE = "not decided by the bands"  # in the explanation of a pair outside their domain
EMPTY = "empty"  # the ``decided_by`` of an empty candidate against a non-empty reference
EMPTY_CANDIDATE = "the candidate answered nothing (empty or whitespace only); the reference did"
EMPTY_REFERENCE = (
    "the golden answer is empty: nothing to compare with, so no verdict; record it again "
    "(pytest --slm-record=all on this test) or delete it"
)
NO_EVIDENCE = (
    "no evidence: {what}, and no later evidence decided it; label pairs and `slam calibrate`, "
    'or send such pairs to the judge (then = ["judge"]) or to review (then = ["review"])'
)
NOT_CERTIFIED = (
    "the judge's {verdict} is not certified (judge_error: slam calibrate --evaluate); label more "
    "pairs and evaluate again, or accept_uncertified_judge = true counts it"
)


class Evidence(Protocol):
    """What is known of one pair beyond its texts, asked for only when a rung needs it."""

    def score(self) -> Score:
        """The configured scorer's score (it may raise: the caller's scorer errors)."""
        ...

    def judge(self) -> Score | None:
        """The judge's score of the pair; None when no judge verdict can be had."""
        ...

    def review(self) -> tuple[str, str] | None:
        """A person's stored verdict and why; None when none is stored."""
        ...

    def why_no_judge(self) -> str | None:
        """Why ``judge()`` gave no verdict, with the fix (None: nothing to add)."""
        ...


@dataclass(frozen=True)
class Policy:
    """A scope's decision rule: the scorer's bands, the cascade, what was measured, and whether
    an uncertified judge counts."""

    by: str  # the scorer's name, on the Score of a pair decided before scoring
    rule: Rule = field(default_factory=Rule)
    then: tuple[str, ...] = ()
    measured: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    accept_uncertified_judge: bool = False
    asks_model: bool = False  # the scorer calls a model: never asked about an identical answer
    # the test module (feature) of the pairs it decides ("" unknown): bands and a judge's error
    # measured on other modules do not hold on it (domain.py)
    module: str = ""
    # (measured key, verdict) -> why: stated bounds this feature's audits withdrew (audit.py);
    # a verdict of that evidence on that side decides nothing here
    withdrawn: Mapping[tuple[str, str], str] = field(default_factory=dict)

    @property
    def errors_here(self) -> Mapping[str, Mapping[str, object]]:
        """What was measured and holds on this module: a judge's error measured on other
        features is left out (its verdicts here are unmeasured, not certified by it)."""
        judge = self.measured.get("judge_error")
        if judge is None or not outside_features(judge, self.module):
            return self.measured
        return {k: v for k, v in self.measured.items() if k != "judge_error"}


def is_blank(text: str) -> bool:
    return not text.strip()


def _settled_before_scoring(candidate: str, reference: str, texts_only: bool) -> str | None:
    """The certain case that decides the pair before the scorer's rule can (rung 1): an empty
    reference, an empty candidate, an identical answer; None when the rule decides it."""
    if is_blank(reference):
        return EMPTY_REFERENCE
    if is_blank(candidate):
        return EMPTY
    if texts_only and identical(candidate, reference):
        return EXACT
    return None


def reaches_scorer(candidate: str, reference: str, texts_only: bool = True) -> bool:
    """Whether the scorer's bands (or threshold) ever decide this pair in a run: not when a
    certain case settles it first. Calibration measures the bands' error and domain on these
    pairs only, the population they decide."""
    return _settled_before_scoring(candidate, reference, texts_only) is None


class Need(enum.Enum):
    """What the policy needs next to decide a pair (:func:`steps`), cheapest first."""

    SCORE = "score"  # the configured scorer's Score
    JUDGE = "judge"  # the judge's Score, or None when no judge verdict can be had
    WHY_NO_JUDGE = "why no judge"  # why the judge gave none, with the fix (or None)
    REVIEW = "review"  # a person's stored (verdict, why), or None


# What is given back for a Need: a Score (SCORE, JUDGE), a stored review (REVIEW), a reason
# (WHY_NO_JUDGE), or None (none to be had).
Given = Score | tuple[str, str] | str | None
Steps = Generator[Need, Given, Score]


def decide_pair(
    policy: Policy, candidate: str, reference: str, evidence: Evidence, texts_only: bool = True
) -> Score:
    """The pair's Score with its verdict, the evidence that decided it, its error, and why it
    is undecided when it is: :func:`steps`, each need answered by ``evidence``."""
    run = steps(policy, candidate, reference, texts_only)
    given: Given = None
    try:
        while True:
            given = _answer(evidence, run.send(given))
    except StopIteration as done:
        decided: Score = done.value
        return decided


def _answer(evidence: Evidence, need: Need) -> Given:
    if need is Need.SCORE:
        return evidence.score()
    if need is Need.JUDGE:
        return evidence.judge()
    if need is Need.WHY_NO_JUDGE:
        return evidence.why_no_judge()
    return evidence.review()


def steps(policy: Policy, candidate: str, reference: str, texts_only: bool = True) -> Steps:
    """The policy as a step function: it yields what it needs next (:class:`Need`), is sent the
    answer, and returns the decided Score. One who only wants to know whether the judge will be
    asked (``slam calibrate --evaluate`` and a run asking the judge ahead) stops at ``JUDGE``.

    ``candidate`` and ``reference`` are the whole answers as text (tool calls included), as a
    person would compare them; ``texts_only`` false (a side called a tool, whose call ids differ
    run to run) leaves identity to the scorers."""
    settled = _settled_before_scoring(candidate, reference, texts_only)
    if settled == EMPTY_REFERENCE:
        score = Score(policy.by, 0.0, EMPTY_REFERENCE, verdict=UNDECIDED)
        score.why_undecided = EMPTY_REFERENCE
        return score
    if settled == EMPTY:
        score = Score(policy.by, 0.0, EMPTY_CANDIDATE, verdict=DIFFERENT, decided_by=EMPTY)
        score.error, score.error_upper = 0.0, 0.0
        return score
    same = settled == EXACT
    # an identical answer is certain: no model is asked about it
    if same and policy.asks_model:
        score = Score(policy.by, 1.0, IDENTICAL)
    else:
        score = _given_score((yield Need.SCORE), Need.SCORE)
    policy.rule.apply(score)
    why = _unless_certified(policy, score)
    if score.decided_by in ("bands", "threshold") and not same:
        band_error = policy.measured.get("band_error")
        outside = band_domain_note(band_error, candidate, reference, score, policy.module)
        if outside is not None:
            why = outside
            score.explanation = f"{score.explanation}; {outside}: {OUTSIDE}"
            score.verdict, score.decided_by = UNDECIDED, None
    if not same:
        why = _unless_audited(policy, score) or why
    if same and score.verdict != DIFFERENT and score.decided_by != "structure":
        score.verdict, score.decided_by, why = EQUIVALENT, EXACT, None
        if IDENTICAL not in score.explanation:
            score.explanation = f"{IDENTICAL}; {score.explanation}"
    score.then = list(policy.then)
    if score.verdict is None and policy.then:  # no bands: similarity decided nothing
        score.verdict = UNDECIDED
    if score.verdict == UNDECIDED:
        why = (yield from _cascade(policy, score)) or why
        if score.verdict == UNDECIDED:
            score.why_undecided = why or NO_EVIDENCE.format(what=_between(score))
    score.error, score.error_upper = verdict_error(score, policy.errors_here)
    return score


def _given_score(given: Given, need: Need) -> Score:
    if not isinstance(given, Score):
        raise TypeError(f"the policy needs a Score for {need.value}, not {given!r}")
    return given


def _cascade(policy: Policy, score: Score) -> Generator[Need, Given, str | None]:
    """The next evidence for an undecided score, cheapest first, until one decides it; the
    reason it is still undecided (None: nothing was said)."""
    why: str | None = None
    for step in policy.then:
        if step == "judge":
            given = yield Need.JUDGE
            if given is None:
                if not why:  # asked only when nothing was said yet, as before
                    said = yield Need.WHY_NO_JUDGE
                    why = said if isinstance(said, str) else None
                continue
            judged = _given_score(given, Need.JUDGE)
            Rule(judge_mode="grade").apply(judged)
            score.replayed = judged.replayed
            _decided(score, judged.verdict, "judge", judged.explanation)
            why = _unless_certified(policy, score) or _unless_audited(policy, score) or why
        elif step == "review":
            human = yield Need.REVIEW
            if isinstance(human, tuple):
                _decided(score, human[0], "review", human[1])
        if score.verdict != UNDECIDED:
            return None
    return why


def _unless_certified(policy: Policy, score: Score) -> str | None:
    """A judge's verdict on a side its evaluation could not certify is no verdict: the pair stays
    undecided (and goes on down the cascade) unless the project accepts it. Returns the reason."""
    if policy.accept_uncertified_judge or not uncertified(score, policy.errors_here):
        return None
    why = NOT_CERTIFIED.format(verdict=score.verdict)
    score.explanation = f"{score.explanation}; {why}, so undecided"
    score.verdict, score.decided_by = UNDECIDED, None
    return why


def _unless_audited(policy: Policy, score: Score) -> str | None:
    """A verdict of evidence whose stated error this feature's audits withdrew is no verdict:
    the pair stays undecided (and goes on down the cascade). Returns the reason."""
    key = MEASURED_KEYS.get(score.decided_by or "")
    why = policy.withdrawn.get((key, score.verdict or "")) if key else None
    if why is None:
        return None
    score.explanation = f"{score.explanation}; {why}, so undecided"
    score.verdict, score.decided_by = UNDECIDED, None
    return why


def _decided(score: Score, verdict: str | None, evidence: str, why: str) -> None:
    """A later step of the cascade decided an undecided score (or left it undecided)."""
    if verdict is None or verdict == UNDECIDED:
        return
    score.verdict, score.decided_by = verdict, evidence
    score.explanation = f"{score.explanation}; {why}"


def _between(score: Score) -> str:
    if score.threshold is None and score.fail_below is None:
        return f"{score.scorer} {score.value:.2f} with no bands set"
    low = f"{score.fail_below:.2f}" if score.fail_below is not None else "-"
    high = f"{score.threshold:.2f}" if score.threshold is not None else "-"
    return f"{score.scorer} {score.value:.2f} between the bands ({low}, {high})"


class Cause(enum.Enum):
    """Why a pair is undecided: each value is the cause as the summary, the gate and the report's
    ``undecided_causes`` print it (the report keeps the value, so older reports read the same)."""

    NO_EVIDENCE = "no evidence"
    JUDGE_NOT_CERTIFIED = "judge not certified"
    OUTSIDE_FEATURES = "outside the calibrated features"
    OUTSIDE_DOMAIN = "outside the calibrated domain"
    WITHDRAWN_BY_AUDITS = "withdrawn by audits"
    NO_JUDGE_VERDICT = "no judge verdict"
    EMPTY_GOLDEN = "empty golden answer"

    @property
    def opening(self) -> str:
        """How a ``why_undecided`` of this cause begins (older reports carry only that text)."""
        return _CAUSE_TEXT[self][0]

    @property
    def fix(self) -> str:
        """The one fix the gate's message gives for pairs of this cause."""
        return _CAUSE_TEXT[self][1]


# Each cause's ``why_undecided`` opening and its fix, in the order ``cause_of`` tries them.
_CAUSE_TEXT: dict[Cause, tuple[str, str]] = {
    Cause.NO_EVIDENCE: (
        "no evidence",
        "label pairs and `slam calibrate`, send them to the judge ([tool.slam.equivalence] then = "
        '["judge"]), or review them (`slam review`, then = ["review"])',
    ),
    Cause.JUDGE_NOT_CERTIFIED: (
        "the judge's ",
        "label more pairs (`slam review`) until `slam calibrate --evaluate` certifies the judge "
        "(it prints how many it needs), or set [tool.slam] accept_uncertified_judge = true",
    ),
    Cause.OUTSIDE_FEATURES: (
        "outside the features",
        "label this feature's own answers (`slam review`, `slam calibrate`: its module gets "
        'bands of its own), or send its pairs to the judge (then = ["judge"])',
    ),
    Cause.OUTSIDE_DOMAIN: (
        "outside what the bands",
        "calibrate on labels of these tests' own answers (`slam calibrate`; a module with labels "
        'enough gets bands of its own), or send them to the judge (then = ["judge"])',
    ),
    Cause.WITHDRAWN_BY_AUDITS: (
        WITHDRAWN_OPENING,
        "recalibrate with the audit labels (`slam review --export-labels labels.jsonl`, then "
        "`slam calibrate --labels labels.jsonl`)",
    ),
    Cause.NO_JUDGE_VERDICT: (
        "the judge ",
        "cache the judge's verdicts with a run (pytest --slm-record=new)",
    ),
    Cause.EMPTY_GOLDEN: ("the golden answer is empty", "record the golden answers again"),
}


def cause_of(why: str | None) -> Cause:
    """The cause of an undecided pair, from its ``why_undecided`` (older reports: no evidence)."""
    for cause, (opening, _) in _CAUSE_TEXT.items():
        if (
            why is not None
            and why.startswith(opening)
            and (cause is not Cause.JUDGE_NOT_CERTIFIED or "not certified" in why)
        ):
            return cause
    return Cause.NO_EVIDENCE


def cause_named(name: str) -> Cause:
    """A cause by its printed value (the report's ``undecided_causes`` keys); an unknown name
    (a newer report) is no evidence."""
    try:
        return Cause(name)
    except ValueError:
        return Cause.NO_EVIDENCE
