"""Which evidence decides a score, and its verdict: the rule of issue 21, in one place.

- Structural scorers (exact, normalized, json, json_schema, label, tool_calls) decide on their own
  (``decided_by`` "structure"): a pair is equivalent at ``STRUCTURE_AT_LEAST`` (1.0, structurally
  equal) unless ``at_least`` says otherwise. A JSON answer one field off is different.
- The judge decides by its own scale (``decided_by`` "judge"): a grade of ``GOOD_GRADE`` (7 of 10)
  or more, or a pairwise value of 0.5 or more ("as good as the reference"), unless ``at_least``.
- Similarity (fuzzy, semantic, a project's own scorer) decides only where the project said how:
  ``at_least`` alone is a user threshold (``decided_by`` "threshold", two outcomes), ``at_least``
  with ``fail_below`` calibrated bands ("bands", three outcomes). Neither: no verdict (None), the
  similarity is only reported.

The run (``run/checks.py``) and ``slam rescore`` both apply it, so a rescored report and a run
with the same configuration give the same verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_slam.compare.bands import Bands
from pytest_slam.records import Score

STRUCTURAL = frozenset({"exact", "normalized", "json", "json_schema", "label", "tool_calls"})
STRUCTURE_AT_LEAST = 1.0  # a structural scorer's default pass level: structurally equal
GOOD_GRADE = 7  # a judge grade (1-10) at or above this is "as good as the reference"
JUDGE_AT_LEAST = {"grade": (GOOD_GRADE - 1) / 9, "pairwise": 0.5}  # on the scorer's 0..1 value
JUDGE = "judge"


def is_structural(scorer: str) -> bool:
    """``json``, or a combined name such as ``tool_calls+json``: every part structural."""
    return all(part in STRUCTURAL for part in scorer.split("+"))


@dataclass(frozen=True)
class Rule:
    """How one test's scores are decided: its bands, and the judge's mode when it judges."""

    at_least: float | None = None
    fail_below: float | None = None
    judge_mode: str = "grade"

    def bands_for(self, scorer: str) -> tuple[Bands, str | None]:
        """The bands that decide a score of ``scorer``, and the evidence they stand for
        (None: no verdict, similarity only reported)."""
        if scorer == JUDGE:
            at_least = self.at_least
            if at_least is None:
                at_least = JUDGE_AT_LEAST.get(self.judge_mode, 0.5)
            return Bands(at_least, self.fail_below if self.at_least is not None else None), JUDGE
        if is_structural(scorer):
            at_least = STRUCTURE_AT_LEAST if self.at_least is None else self.at_least
            fail_below = self.fail_below if self.at_least is not None else None
            return Bands(at_least, fail_below), "structure"
        bands = Bands(self.at_least, self.fail_below)
        if not bands.decides:
            return bands, None
        return bands, "bands" if self.fail_below is not None else "threshold"

    def apply(self, score: Score) -> Score:
        """Set the score's bands, verdict and ``decided_by``, in place; returns it."""
        bands, evidence = self.bands_for(score.scorer)
        score.threshold, score.fail_below = bands.at_least, bands.fail_below
        score.verdict = bands.decide(score.value)
        score.decided_by = evidence if score.verdict is not None else None
        return score
