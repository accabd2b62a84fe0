"""A scorer from outside pytest_slam, held to the scorer contract.

The smallest such scorer is a plain class whose ``score(candidate, reference)`` returns a number in
0..1 (1: equivalent); it may return a :class:`~pytest_slam.records.Score` instead, to explain
itself. Anything else is a one-line error naming the class, never a verdict on the model.
"""

from __future__ import annotations

import numbers
from typing import Any

from pytest_slam.compare.about import describe
from pytest_slam.compare.scorer import Scorer, ScorerError, shorten
from pytest_slam.records import Score


class BadScore(ScorerError):
    """A scorer returned something that is not a value in 0..1."""


class Plugged(Scorer):
    """Wraps ``inner`` (any object with ``score``): its Scores carry ``name``, the name the scorer
    was found by, and its description is the one ``inner`` gives (or the defaults)."""

    def __init__(self, name: str, inner: Any) -> None:
        self.name, self.inner = name, inner
        self.about = describe(inner)
        self.where = f"{type(inner).__module__}:{type(inner).__qualname__}"

    def score(self, candidate: str, reference: str, **context: Any) -> Score:
        out = self.inner.score(candidate, reference, **context)
        value, why = (out.value, out.explanation) if isinstance(out, Score) else (out, "")
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not (number and 0.0 <= float(value) <= 1.0):  # NaN fails too
            shown = shorten(repr(value), 60)
            raise BadScore(
                f"{self.where}.score() returned {shown}, not a number in 0..1; "
                "return the similarity of the two answers, 1 for equivalent"
            )
        return Score(self.name, float(value), shorten(str(why)))

    def __repr__(self) -> str:
        return f"Plugged({self.name!r}, {self.where})"
