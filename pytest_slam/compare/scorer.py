"""The scorer contract: one small ABC, its errors, and helpers every scorer shares.

A scorer is configured once (``FuzzyScorer(method="ratio")``) and then scores many
candidate/reference pairs; it returns a :class:`~pytest_slam.records.Score` whose value lies in
[0, 1] and whose explanation says, in a line, why. Scorers never raise for bad *answers* (empty,
huge, not JSON): those get a clear verdict. They raise only when they cannot work at all
(:class:`ScorerUnavailable`), because a missing extra or an unreachable endpoint is not a
verdict on the model.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable

from pytest_slam.compare.about import SIMILAR, About
from pytest_slam.errors import SlamError
from pytest_slam.records import Score

EXPLANATION_CHARS = 300  # an explanation is one readable line, not a dump


class ScorerError(SlamError, kind="scorer"):
    """Base class of every error a scorer raises."""


class ScorerUnavailable(ScorerError):
    """The scorer cannot run here: its backend is unreachable or misconfigured."""


class MissingExtra(ScorerUnavailable, ImportError, kind="extra"):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, scorer: str, package: str, extra: str, before: str = "") -> None:
        hint = f"pip install 'pytest-slam[{extra}]'"
        if before:
            hint = f"{before}, then {hint}"
        verb = "are" if "," in package else "is"
        super().__init__(f"the {scorer} scorer needs {package}, which {verb} not installed: {hint}")


class Scorer(ABC):
    """Compares a candidate answer with a reference answer.

    Subclasses set ``name`` and ``about`` (what their value is evidence of, what they need:
    :mod:`.about`) and implement :meth:`score`. Options go to ``__init__`` so a configured scorer
    can be built once from markers or ``[tool.slam]`` and reused.
    """

    name: str = "scorer"
    about: About = SIMILAR

    @abstractmethod
    def score(self, candidate: str, reference: str) -> Score:
        """Return a Score in [0, 1]: 1 means equivalent for this scorer's notion of equal."""

    def score_many(self, pairs: Iterable[tuple[str, str]]) -> list[Score]:
        """Score several pairs; scorers with a batched backend override this."""
        return [self.score(candidate, reference) for candidate, reference in pairs]

    def verdict(self, value: float, explanation: str = "") -> Score:
        """Build this scorer's Score with the value clamped to [0, 1] and a short explanation."""
        if math.isnan(value):
            value = 0.0
        return Score(self.name, min(1.0, max(0.0, float(value))), shorten(explanation))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def empty_verdict(scorer: Scorer, candidate: str, reference: str) -> Score | None:
    """The shared verdict for empty answers, or None when both have content.

    An empty candidate is a common small-model failure (stop token first, a refusal filtered
    away); it must read as such instead of as a low similarity.
    """
    cand_empty, ref_empty = not candidate.strip(), not reference.strip()
    if cand_empty and ref_empty:
        return scorer.verdict(1.0, "both answers are empty")
    if cand_empty:
        return scorer.verdict(0.0, "candidate answer is empty")
    if ref_empty:
        return scorer.verdict(0.0, "reference answer is empty")
    return None


def shorten(text: str, limit: int = EXPLANATION_CHARS) -> str:
    """Cut ``text`` to ``limit`` characters with a visible marker."""
    if len(text) <= limit:
        return text
    return text[: limit - 20].rstrip() + f" ... [+{len(text) - limit + 20} chars]"


def preview(text: str, limit: int = 60) -> str:
    """A quoted one-line preview of an answer for explanations."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 3] + "..."
    return repr(flat)
