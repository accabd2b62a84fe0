"""Which evidence decides a score, and its verdict: the rule of issue 21, in one place.

What a score's value is evidence of comes from its scorer's description (``about.py``), looked up by
the name the Score carries, never from the scorer's class:

- A scorer whose value is a verdict by itself (``verdict_at``: structural scorers at 1.0, the judge
  at its grade) decides on its own (``decided_by`` "structure", or "judge" for judge evidence): a
  pair is equivalent at that level unless ``at_least`` says otherwise. A JSON answer one field off
  is different; a judge grade of 7 of 10 (pairwise: 0.5) is as good as the reference.
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
from pytest_slam.compare.named import describe_name
from pytest_slam.records import Score


def is_structural(scorer: str) -> bool:
    """``json``, or a combined name such as ``tool_calls+json``: a verdict alone, by structure."""
    about = describe_name(scorer)
    return about.decides_alone and about.decided_by == "structure"


@dataclass(frozen=True)
class Rule:
    """How one test's scores are decided: its bands, and the ``mode`` option of a scorer whose
    verdict level depends on it (the judge's grade or pairwise)."""

    at_least: float | None = None
    fail_below: float | None = None
    judge_mode: str = "grade"

    def bands_for(self, scorer: str) -> tuple[Bands, str | None]:
        """The bands that decide a score of ``scorer``, and the evidence they stand for
        (None: no verdict, similarity only reported)."""
        about = describe_name(scorer)
        if about.decides_alone:
            at_least = about.level(self.judge_mode) if self.at_least is None else self.at_least
            fail_below = self.fail_below if self.at_least is not None else None
            return Bands(at_least, fail_below), about.decided_by
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
