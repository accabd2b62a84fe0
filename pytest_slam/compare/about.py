"""What a scorer says about itself: the kind of evidence its value is, the context it needs, whether
``slam calibrate`` may choose bands for it, and whether its value alone is a verdict.

The run (``run/score/checks.py``), the cascade (``decide.py``), calibration and the report read this
description, never a scorer's class or name, so a scorer from another package is treated like a
built-in one. A scorer sets ``about = About(...)``; a class that does not import pytest_slam may set
the same names as plain class attributes (``evidence = "structure"``, ``verdict_at = 1.0``); a class
that says nothing is similarity evidence, calibratable, needing nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EXACT, STRUCTURE, SIMILARITY, JUDGE = "exact", "structure", "similarity", "judge"
EVIDENCE = (EXACT, STRUCTURE, SIMILARITY, JUDGE)
NEEDS = {  # what a scorer may need besides the two answers, and how the run gives it
    "question": "the pair's question (the request's last user message), as score(..., question=)",
    "model": "a model call: built with the [tool.slam] judge (complete=, model=), and given the "
    "golden file's verdict cache as score(..., cache=)",
    "schema": "a JSON Schema, its schema= option",
    "tools": "the answers' tool calls",
}
STRUCTURALLY_EQUAL = 1.0  # a structural scorer's verdict level: equal in structure


@dataclass(frozen=True)
class About:
    """One scorer's description (the defaults: similarity, calibratable, needing nothing)."""

    evidence: str = SIMILARITY  # one of EVIDENCE
    needs: frozenset[str] = frozenset()  # keys of NEEDS
    calibratable: bool = True  # slam calibrate may certify bands for its value
    verdict_at: float | None = None  # its value alone decides at this level; None: bands decide
    by_mode: tuple[tuple[str, float], ...] = ()  # verdict level by the scorer's ``mode`` option
    compares: str = "text"  # what it compares, in an explanation of two combined scores
    requires: tuple[str, ...] = ()  # modules it needs; calibration skips it where one is missing

    def __post_init__(self) -> None:
        if self.evidence not in EVIDENCE:
            raise ValueError(f"evidence {self.evidence!r} is not one of {', '.join(EVIDENCE)}")
        unknown = sorted(set(self.needs) - set(NEEDS))
        if unknown:
            raise ValueError(f"needs {', '.join(unknown)}: known needs are {', '.join(NEEDS)}")
        if self.verdict_at is not None and not 0.0 <= self.verdict_at <= 1.0:
            raise ValueError(f"verdict_at {self.verdict_at!r} must be in 0..1")

    @property
    def decides_alone(self) -> bool:
        """Whether the value is a verdict by itself (structural at 1.0, the judge at its grade)."""
        return self.verdict_at is not None

    @property
    def decided_by(self) -> str:
        """The ``Score.decided_by`` of a verdict its value gives alone."""
        return "judge" if self.evidence == JUDGE else "structure"

    def level(self, mode: str | None = None) -> float | None:
        """The value at or above which it calls a pair equivalent by itself, in ``mode``."""
        return dict(self.by_mode).get(mode or "", self.verdict_at)


# The built-in scorers that keep only their options, no model and no state between calls: safe to
# score on another thread (run/test/judge_ahead.py works out a pair's judge request there).
STATELESS_MODULES = frozenset(
    {"pytest_slam.compare.text", "pytest_slam.compare.structured", "pytest_slam.compare.toolcalls"}
)


def stateless(scorer: object) -> bool:
    """Whether ``scorer`` is a built-in that keeps only its options (``STATELESS_MODULES``); a
    plugged scorer is someone else's code, ``semantic`` holds a model: neither is."""
    return type(scorer).__module__ in STATELESS_MODULES


SIMILAR = About()
EXACT_MATCH = About(EXACT, calibratable=False, verdict_at=STRUCTURALLY_EQUAL)


def describe(scorer: object) -> About:
    """A scorer's (class or instance) description: its ``about``, else its plain attributes
    ``evidence``, ``needs``, ``calibratable`` and ``verdict_at``, else the defaults. ValueError
    when what it says is not a description."""
    about = getattr(scorer, "about", None)
    if isinstance(about, About):
        return about
    if about is not None:
        raise ValueError(f"about = {about!r} is not a pytest_slam.compare.about.About")
    needs = getattr(scorer, "needs", ())
    if isinstance(needs, str) or not isinstance(needs, Sequence | set | frozenset):
        raise ValueError(f"needs = {needs!r} must be a list of names, of: {', '.join(NEEDS)}")
    verdict_at = getattr(scorer, "verdict_at", None)
    if verdict_at is not None and not isinstance(verdict_at, int | float):
        raise ValueError(f"verdict_at = {verdict_at!r} must be a number in 0..1 or None")
    return About(
        evidence=str(getattr(scorer, "evidence", SIMILARITY)),
        needs=frozenset(str(n) for n in needs),
        calibratable=bool(getattr(scorer, "calibratable", True)),
        verdict_at=None if verdict_at is None else float(verdict_at),
    )


def combined(parts: Sequence[About]) -> About:
    """Two scores of one answer taken as one (the lower value, ``a+b``): a verdict alone only when
    every part gives one by the same evidence, at the strictest part's level."""
    alone = all(p.decides_alone for p in parts) and len({p.decided_by for p in parts}) == 1
    kinds = {p.evidence for p in parts}
    evidence = kinds.pop() if len(kinds) == 1 else STRUCTURE if alone else SIMILARITY
    levels = [p.verdict_at for p in parts if p.verdict_at is not None]
    return About(
        evidence=evidence,
        needs=frozenset().union(*(p.needs for p in parts)),
        calibratable=all(p.calibratable for p in parts),
        verdict_at=max(levels) if alone and levels else None,
    )
