"""Reading what LLM judges write: a 1-10 grade, or which of two answers is better.

Judges rarely follow the requested format exactly, so each reader tries the asked-for form first
("[[7]]", "[[A]]") and then the common variants ("Rating: 7", "7/10", "I'd give it a 7",
"Assistant B is better", JSON). Forms are tried strongest first; when one form yields two
different verdicts, or nothing matches, :class:`JudgeUnparseable` says what the judge wrote.
"""

from __future__ import annotations

import json
import re

from pytest_slam.compare.scorer import ScorerError, preview
from pytest_slam.records import JSON

_NUM = r"(10|[1-9](?:\.\d+)?)"
_AB = r"(?-i:[AB])"
GRADE_FORMS = (
    re.compile(r"\[\[\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*10\s*)?\]\]"),
    re.compile(rf"\b(?:rating|score|grade)\b\**\s*[:=]?\s*\**\s*\[*\s*{_NUM}(?!\d)", re.I),
    re.compile(rf"(?<![\d.]){_NUM}\s*(?:/|out of)\s*10\b", re.I),
    re.compile(
        rf"\b(?:give|rate|award)\s+(?:it|this|the\s+\w+)?\s*(?:an?\s+)?{_NUM}(?![\d/])", re.I
    ),
    re.compile(rf"^\W*{_NUM}\W*$"),
)
PAIR_FORMS = (
    re.compile(r"\[\[\s*(A|B|C|tie)\s*\]\]", re.I),
    re.compile(
        rf"\b(?:(?:assistant|answer|response|output)\s*)?\(?({_AB})\)?(?:'s\s+\w+)?"
        r"\s+(?:is|was)\s+(?:better|superior|preferred|stronger)\b",
        re.I,
    ),
    re.compile(
        rf"\b(?:verdict|winner|preference)\s*(?:is)?\s*[:=]?\s*\**\s*\[*\s*({_AB}|tie)\b", re.I
    ),
    re.compile(r"^\W*(A|B|tie)\W*$", re.I),
)
TIE_WORDS = re.compile(r"\b(?:it'?s a tie|(?:equally|both) (?:good|bad|helpful)|tie)\b", re.I)
JSON_GRADE_KEYS = ("score", "rating", "grade")
JSON_PAIR_KEYS = ("winner", "verdict", "preference", "better")


class JudgeUnparseable(ScorerError, kind="judge"):
    """The judge's answer holds no readable verdict; ``answer`` is what it wrote."""

    def __init__(self, what: str, answer: str, why: str = "") -> None:
        self.answer = answer
        detail = f" ({why})" if why else ""
        super().__init__(
            f"judge answered nonsense{detail}: {preview(answer, 120)}; expected {what}"
        )


def parse_grade(answer: str) -> float:
    """Read a 1-10 grade out of a judge's answer."""
    from_json = _json_field(answer, JSON_GRADE_KEYS)
    if from_json is not None:
        try:
            return _in_range(float(from_json), answer)
        except (TypeError, ValueError):
            raise JudgeUnparseable("a grade 1-10", answer, f"score {from_json!r}") from None
    for form in GRADE_FORMS:
        found = {float(m) for m in form.findall(answer.strip())}
        if len(found) == 1:
            return _in_range(found.pop(), answer)
        if len(found) > 1:
            grades = ", ".join(f"{g:g}" for g in sorted(found))
            raise JudgeUnparseable("one grade 1-10", answer, f"conflicting grades {grades}")
    raise JudgeUnparseable("a grade 1-10 like [[7]]", answer)


def _in_range(grade: float, answer: str) -> float:
    if not 1.0 <= grade <= 10.0:
        raise JudgeUnparseable("a grade 1-10", answer, f"grade {grade:g} is outside 1-10")
    return grade


def parse_preference(answer: str) -> str:
    """Read "A", "B" or "tie" out of a pairwise judge's answer."""
    from_json = _json_field(answer, JSON_PAIR_KEYS)
    if from_json is not None:
        return _choice(str(from_json), answer)
    for form in PAIR_FORMS:
        found = {_choice(m, answer) for m in form.findall(answer.strip())}
        if len(found) == 1:
            return found.pop()
        if len(found) > 1:
            raise JudgeUnparseable("one verdict", answer, f"it names {' and '.join(sorted(found))}")
    if TIE_WORDS.search(answer):
        return "tie"
    raise JudgeUnparseable("a verdict like [[A]], [[B]] or [[C]] for a tie", answer)


def _choice(token: str, answer: str) -> str:
    token = token.strip().strip("[]*").strip().upper()
    if token in ("A", "B"):
        return token
    if token in ("C", "TIE"):
        return "tie"
    if token.startswith("ASSISTANT ") and token[-1] in "AB":
        return token[-1]
    raise JudgeUnparseable("A, B or tie", answer, f"verdict {token!r}")


def _json_field(answer: str, keys: tuple[str, ...]) -> JSON:
    """The first of ``keys`` in the first JSON object of the answer, or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", answer):
        try:
            value, _ = decoder.raw_decode(answer, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            lowered = {str(k).lower(): v for k, v in value.items()}
            for key in keys:
                if key in lowered:
                    return lowered[key]
    return None
