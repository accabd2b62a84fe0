"""A scorer from outside pytest_slam, held to the scorer contract and fenced.

The smallest such scorer is a plain class whose ``score(candidate, reference)`` returns a number in
0..1 (1: equivalent); it may return a :class:`~pytest_slam.records.Score` instead, to explain
itself. Anything else is a one-line error naming the class, never a verdict on the model.

It is someone else's code, so a fault of it reads as theirs: what it raises is ``ScorerRaised``, one
line with the exception, the line that raised it, the distribution and entry point it came from
and the fix (``swap/thirdparty.py``). It gets ``deadline_s`` seconds a score (``[tool.slam]
scorer_timeout_s``; 0: no deadline, called in the test's own thread): a score still running then
is ``ScorerTimeout``, and that scorer, left running on its daemon thread (one per scorer, the same
for all its calls), is not asked again in the run (every later pair fails at once with the same
line), so a hung scorer never hangs CI.
"""

from __future__ import annotations

import contextvars
import numbers
from typing import Any

from pytest_slam.compare.about import describe
from pytest_slam.compare.scorer import Scorer, ScorerError, shorten
from pytest_slam.errors import SlamError
from pytest_slam.records import Score
from pytest_slam.swap.thirdparty import FAULTS, CallThread, Origin, fault, origin_of

DEADLINE_S = 60.0  # settings.Settings.scorer_timeout_s's default
FIX = "choose another scorer ([tool.slam.equivalence] by)"


class BadScore(ScorerError):
    """A scorer returned something that is not a value in 0..1."""


class ScorerRaised(ScorerError):
    """A scorer from outside the package raised while scoring."""


class ScorerTimeout(ScorerError):
    """A scorer from outside the package gave no score within its deadline."""


class Plugged(Scorer):
    """Wraps ``inner`` (any object with ``score``): its Scores carry ``name``, the name the scorer
    was found by, and its description is the one ``inner`` gives (or the defaults)."""

    def __init__(self, name: str, inner: Any, origin: Origin | None = None) -> None:
        self.name, self.inner = name, inner
        self.about = describe(inner)
        self.where = f"{type(inner).__module__}:{type(inner).__qualname__}"
        self.origin = origin or origin_of("pytest_slam.scorers", self.where, None)
        self.deadline_s = DEADLINE_S
        self.hung: str | None = None  # the line of its timeout: not asked again
        self._worker: CallThread | None = None  # the one thread it scores on, once asked

    def score(self, candidate: str, reference: str, **context: Any) -> Score:
        out = self._call(candidate, reference, context)
        value, why = (out.value, out.explanation) if isinstance(out, Score) else (out, "")
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not (number and 0.0 <= float(value) <= 1.0):  # NaN fails too
            shown = shorten(repr(value), 60)
            raise BadScore(
                f"{self.where}.score() returned {shown}, not a number in 0..1; "
                "return the similarity of the two answers, 1 for equivalent"
            )
        return Score(self.name, float(value), shorten(str(why)))

    def _call(self, candidate: str, reference: str, context: dict[str, Any]) -> Any:
        """``inner.score``, fenced: on its own thread under a deadline, unless there is none."""
        if self.hung:
            raise ScorerTimeout(self.hung)
        if self.deadline_s <= 0:
            return self._guarded(candidate, reference, context)
        if self._worker is None:
            self._worker = CallThread(f"slam-scorer-{self.name}")
        run = contextvars.copy_context().run  # the test's context vars, on the scorer's thread
        call = lambda: run(self._boxed, candidate, reference, context)  # noqa: E731
        done = self._worker.run(call, self.deadline_s)
        if done is None:
            self.hung = (
                f"gave no score within {self.deadline_s:g} s ([tool.slam] scorer_timeout_s), so "
                f"it is not asked again in this run; it is {self.origin.describe()}: "
                f"{self.origin.fix(FIX + ', or raise scorer_timeout_s')}"
            )
            raise ScorerTimeout(self.hung)
        ok, result = done
        if not ok:
            raise result
        return result

    def _boxed(self, candidate: str, reference: str, context: dict[str, Any]) -> tuple[bool, Any]:
        try:
            return True, self._guarded(candidate, reference, context)
        except BaseException as exc:  # handed to the test's thread, raised there
            return False, exc

    def _guarded(self, candidate: str, reference: str, context: dict[str, Any]) -> Any:
        try:
            return self.inner.score(candidate, reference, **context)
        except SlamError:  # pytest-slam's own errors (a missing extra): as built-ins raise them
            raise
        except FAULTS as exc:  # SystemExit too: a scorer never ends the run
            raise ScorerRaised(
                f"raised {fault(exc)}; it is {self.origin.describe()}: {self.origin.fix(FIX)}"
            ) from None

    def __repr__(self) -> str:
        return f"Plugged({self.name!r}, {self.where})"
