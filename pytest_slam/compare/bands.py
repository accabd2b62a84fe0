"""Three outcomes for a similarity score: equivalent, different, or undecided.

A similarity score is evidence only where labels showed it to be: above a pass band its pairs were
(almost all) acceptable, below a fail band (almost all) unacceptable. Between the two the score
says nothing a reviewer would accept, so the pair is *undecided* and goes to the next evidence
(a judge, a human). ``at_least`` alone is a threshold the user set: two outcomes, as before.
``fail_below`` alone is a fail band with no pass band (long open-ended answers, where low
similarity does mean a worse answer but high similarity proves nothing): different or undecided.
Neither: similarity is reported, no pair is decided by it.
"""

from __future__ import annotations

from dataclasses import dataclass

EQUIVALENT = "equivalent"
DIFFERENT = "different"
UNDECIDED = "undecided"
VERDICTS = (EQUIVALENT, DIFFERENT, UNDECIDED)


@dataclass(frozen=True)
class Bands:
    """A pass band (``value >= at_least``) and a fail band (``value < fail_below``)."""

    at_least: float | None = None
    fail_below: float | None = None

    def __post_init__(self) -> None:
        for name in ("at_least", "fail_below"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and 0 <= value <= 1):
                raise ValueError(f"{name} must be a number between 0 and 1, not {value!r}")
        if (
            self.at_least is not None
            and self.fail_below is not None
            and self.fail_below > self.at_least
        ):
            raise ValueError(
                f"fail_below ({self.fail_below}) is above at_least ({self.at_least}): "
                "the fail band must lie below the pass band"
            )

    @property
    def decides(self) -> bool:
        """Whether these bands call any pair equivalent or different."""
        return self.at_least is not None or self.fail_below is not None

    def decide(self, value: float) -> str | None:
        """The verdict on one score; None when no band is set (similarity only reported)."""
        if not self.decides:
            return None
        if self.at_least is not None and value >= self.at_least:
            return EQUIVALENT
        if self.fail_below is None or value < self.fail_below:
            return DIFFERENT
        return UNDECIDED
