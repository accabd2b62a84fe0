"""``assert_equivalent``: score a candidate answer against the reference and fail readably.

The failure message is the whole user interface: the scorer, the score against the threshold,
the scorer's reason, a side-by-side diff, and (when the plugin installs a writer) where the
obtained answer was written so it can be inspected or promoted to golden.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pytest_slam.compare.defaults import DEFAULT_AT_LEAST, DEFAULT_SCORER
from pytest_slam.compare.diff import side_by_side
from pytest_slam.compare.named import get_scorer
from pytest_slam.compare.scorer import Scorer
from pytest_slam.errors import SlamError
from pytest_slam.records import JSON, Call, GoldenAnswer, GoldenRecord, Score
from pytest_slam.util.files import WriteFailed
from pytest_slam.util.textcodec import visible

Answer = str | Call | GoldenAnswer | GoldenRecord | dict[str, JSON] | list[JSON]
ObtainedWriter = Callable[[str, str], "str | None"]

_obtained_writer: ObtainedWriter | None = None


class EquivalenceError(AssertionError, SlamError, kind="equivalence"):
    """A candidate scored below the threshold; ``score`` holds the verdict."""

    def __init__(self, message: str, score: Score) -> None:
        super().__init__(message)
        self.score = score


def set_obtained_writer(fn: ObtainedWriter | None) -> None:
    """Install (or with None, remove) ``fn(candidate_text, scorer_name) -> path or None``.

    The plugin uses it to write a failing candidate's answer next to the golden file.
    """
    global _obtained_writer
    _obtained_writer = fn


def as_text(answer: Answer, role: str) -> tuple[str, bool]:
    """The text to compare, and whether it came from parsed JSON (dict or list)."""
    if isinstance(answer, str):
        return answer, False
    if isinstance(answer, Call | GoldenAnswer):
        return answer.text or "", False
    if isinstance(answer, GoldenRecord):
        if answer.answer is None:
            raise ValueError(f"{role}: golden record {answer.key} has no recorded answer")
        return answer.answer.text or "", False
    if isinstance(answer, dict | list):
        return json.dumps(answer, sort_keys=True, ensure_ascii=False, indent=2), True
    raise TypeError(
        f"{role} must be a str, Call, GoldenAnswer, GoldenRecord, dict or list, "
        f"not {type(answer).__name__}"
    )


def evaluate(
    candidate: Answer,
    reference: Answer,
    by: str | Scorer | None = None,
    at_least: float | None = None,
    **options: object,
) -> Score:
    """Score ``candidate`` against ``reference`` without raising; ``threshold`` set from at_least.

    ``by`` defaults to "json" when either side is a dict or list, else "fuzzy".
    """
    if at_least is not None and not 0.0 <= at_least <= 1.0:
        raise ValueError(f"at_least must be between 0 and 1, not {at_least!r}")
    cand_text, cand_json = as_text(candidate, "candidate")
    ref_text, ref_json = as_text(reference, "reference")
    if by is None:
        by = "json" if cand_json or ref_json else DEFAULT_SCORER
    scorer = get_scorer(by, **options)
    if isinstance(candidate, Call) and candidate.error:
        score = Score(scorer.name, 0.0, f"candidate call failed: {candidate.error}")
    else:
        score = scorer.score(cand_text, ref_text)
    score.threshold = at_least
    return score


def assert_equivalent(
    candidate: Answer,
    reference: Answer,
    by: str | Scorer | None = None,
    at_least: float = DEFAULT_AT_LEAST,
    **options: object,
) -> Score:
    """Return the Score when it reaches ``at_least``; raise EquivalenceError otherwise.

    The default, 0.7 with fuzzy, is the project's one default verdict (``compare/defaults.py``).

    ``by`` is a scorer name ("fuzzy" by default; "json" for dict/list answers) or a Scorer;
    ``options`` configure a named scorer (``ignore=["$.id"]``, ``choices=[...]``).
    """
    __tracebackhide__ = True  # pytest shows the test's line, not this function's
    score = evaluate(candidate, reference, by, at_least, **options)
    if score.passed:
        return score
    cand_text, _ = as_text(candidate, "candidate")
    ref_text, _ = as_text(reference, "reference")
    raise EquivalenceError(failure_message(score, cand_text, ref_text), score)


def failure_message(score: Score, candidate: str, reference: str) -> str:
    """The full failure text: verdict, reason, side-by-side diff, obtained-answer path.

    The answers are shown as ``textcodec.visible`` writes them (a bidi override, an escape
    character or a lone surrogate as a marker), so no answer drives the terminal or the CI log."""
    lines = [
        f"candidate is not equivalent to the reference by {score.scorer}: "
        f"score {score.value:.3f} < at_least {score.threshold or 0.0:.3f}",
        f"why: {score.explanation or '(no explanation)'}",
        f"reference ({len(reference):,} chars) | candidate ({len(candidate):,} chars):",
        side_by_side(visible(reference), visible(candidate)),
    ]
    written = _write_obtained(candidate, score.scorer)
    if written:
        lines.append(written)
    return "\n".join(lines)


def _write_obtained(candidate: str, scorer: str) -> str | None:
    """Run the installed writer; a writer that fails is reported, never masks the verdict."""
    if _obtained_writer is None:
        return None
    try:
        path = _obtained_writer(candidate, scorer)
    except WriteFailed as err:  # a full disk, a read-only folder: its file, error and fix
        return f"the obtained answer was not kept: {err}"
    except Exception as err:
        return f"could not write the obtained answer: {type(err).__name__}: {err}"
    return f"obtained answer written to {path}" if path else None
