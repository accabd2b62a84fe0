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

- An answer identical to the reference (``identical``) is equivalent whatever the scorer or the
  configuration ("exact": certain, no error), and no model is asked about it.

The one verdict policy (``policy.decide_pair``) applies it for the run, ``slam rescore`` and
``slam calibrate --evaluate``, so all three give the same verdicts with the same configuration.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TypeVar

from pytest_slam.compare.bands import DIFFERENT, EQUIVALENT, Bands
from pytest_slam.compare.named import describe_name
from pytest_slam.records import Score

EXACT = "exact"  # the ``decided_by`` of an answer identical to the reference
IDENTICAL = "identical to the reference (after Unicode NFKC, line endings and outer whitespace)"


def same_text(text: str) -> str:
    """The text as ``identical`` compares it: only what never changes an answer's meaning
    (Unicode NFKC, line endings, leading and trailing whitespace), so equal is certain."""
    text = unicodedata.normalize("NFKC", text).replace("\r\n", "\n").replace("\r", "\n")
    return text.strip()


def identical(candidate: str, reference: str) -> bool:
    """Whether a non-empty candidate answer is the reference's, character for character."""
    cand = same_text(candidate)
    return bool(cand) and cand == same_text(reference)


# Evidence whose verdict is certain by construction: the answer is the reference's, its structure
# was compared exactly, or a person said so (the labels every other evidence is measured against).
CERTAIN = (EXACT, "structure", "review")
# The [tool.slam.equivalence] key holding each measured evidence's error (config.MeasuredError).
MEASURED_KEYS = {"threshold": "band_error", "bands": "band_error", "judge": "judge_error"}


def verdict_error(
    score: Score, measured: Mapping[str, Mapping[str, object]]
) -> tuple[float | None, float | None]:
    """(error, 95% upper bound) of the evidence behind the score's verdict: its pass error when
    equivalent, its fail error when different; 0 when certain; None when not measured."""
    if score.verdict not in (EQUIVALENT, DIFFERENT):
        return None, None
    if score.decided_by in CERTAIN:
        return 0.0, 0.0
    table = measured.get(MEASURED_KEYS.get(score.decided_by or "", "")) or {}
    side = "pass" if score.verdict == EQUIVALENT else "fail"
    rate, upper = table.get(side), table.get(f"{side}_upper")
    if not isinstance(upper, int | float):
        return None, None
    return (float(rate) if isinstance(rate, int | float) else None), float(upper)


def uncertified(score: Score, measured: Mapping[str, Mapping[str, object]]) -> bool:
    """A judge's verdict on a side that ``slam calibrate --evaluate`` measured and could not
    certify (``judge_error``'s ``pass_certified`` / ``fail_certified`` false)."""
    if score.decided_by != "judge" or score.verdict not in (EQUIVALENT, DIFFERENT):
        return False
    side = "pass" if score.verdict == EQUIVALENT else "fail"
    return (measured.get("judge_error") or {}).get(f"{side}_certified") is False


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


BANDS = ("at_least", "fail_below")


V = TypeVar("V")


def layered(
    below: Mapping[str, V], layer: Mapping[str, V], keep: Collection[str], default_by: str
) -> dict[str, V]:
    """An equivalence table updated by a narrower one (a module's table, a test's mark), as the
    run and ``slam calibrate --evaluate`` both read it. A layer naming another scorer keeps only
    the rule's keys below (``keep``: a fuzzy ``method`` is no option of ``semantic``) but not the
    bands (they are on the other scorer's scale); a layer that changes the scorer or the bands
    without its own ``band_error`` does not inherit the error measured for other bands, so its
    verdicts say unmeasured rather than carry another rule's error."""
    config = dict(below)
    other_scorer = "by" in layer and layer["by"] != config.get("by", default_by)
    if other_scorer:
        config = {k: v for k, v in config.items() if k in keep and k not in BANDS}
    if (other_scorer or any(k in layer for k in BANDS)) and "band_error" not in layer:
        config.pop("band_error", None)
    config.update(layer)
    return config
