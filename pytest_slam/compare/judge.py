"""An LLM as judge: a reference-guided 1-10 grade, or a pairwise preference asked both ways.

The judge model is reached through a ``complete(messages) -> str`` callable, so any model the
plugin can call (a hosted GPT-4, a local server) can judge, and this module needs no client.
Verdicts go through an optional cache (``get(key)`` / ``put(key, verdict)``), keyed by everything
that determines them, so a CI run replays committed verdicts: deterministic, free, offline.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import Protocol, TypeGuard, TypeVar

from pytest_slam.compare.about import JUDGE, About
from pytest_slam.compare.judge_parse import JudgeUnparseable, parse_grade, parse_preference
from pytest_slam.compare.scorer import (
    Scorer,
    ScorerError,
    ScorerUnavailable,
    empty_verdict,
    preview,
)
from pytest_slam.records import JSON, Score
from pytest_slam.util.textcodec import dumps

# Bump when a prompt below changes: cached verdicts from older prompts then no longer replay.
TEMPLATE_VERSION = "slam-judge-1"
MODES = ("grade", "pairwise")
GOOD_GRADE = 7  # a grade (1-10) at or above this is "as good as the reference"
# The judge's verdict level on its 0..1 value, by mode: that grade, or "as good" pairwise.
AT_LEAST = {"grade": (GOOD_GRADE - 1) / 9, "pairwise": 0.5}
Complete = Callable[[list[dict[str, str]]], str]
# A verdict as cached with the golden record: {"value", "explanation", "judge", "mode", ...}
JudgeVerdict = dict[str, JSON]
T = TypeVar("T")

SYSTEM = "You are an impartial judge of the answers that AI assistants give to users."
GRADE_PROMPT = """\
Rate the assistant's answer to the user's question below. Use the reference answer as the \
standard for correctness and helpfulness; do not reward length or style. Explain briefly, then \
give a rating from 1 (wrong or useless) to 10 (as good as the reference), exactly in the form \
"Rating: [[7]]".

[Question]
{question}

[Reference answer]
{reference}

[Assistant's answer]
{candidate}"""
PAIR_PROMPT = """\
Compare two AI assistants' answers to the user's question below, for helpfulness, correctness \
and detail. The order in which they appear and their length must not sway you. Explain briefly, \
then give your verdict exactly as "[[A]]" if A is better, "[[B]]" if B is better, or "[[C]]" for \
a tie.

[Question]
{question}

[Assistant A's answer]
{a}

[Assistant B's answer]
{b}"""
NO_QUESTION = "(not given: judge the answers on their own)"
# Sent once after an unreadable verdict, with the judge's own answer before it.
REMINDER = {
    "grade": 'Your answer had no readable rating. Reply with the rating only, as "Rating: [[7]]".',
    "pairwise": 'Your answer had no readable verdict. Reply with the verdict only: "[[A]]", '
    '"[[B]]" or "[[C]]" for a tie.',
}
POINTS = {"win": 1.0, "tie": 0.5, "loss": 0.0}


class JudgeUnjudged(ScorerError, kind="judge"):
    """The judge gave no readable verdict, twice: the pair is unjudged, never scored 0."""

    def __init__(self, model: str, cause: JudgeUnparseable) -> None:
        self.answer = cause.answer
        super().__init__(f"judge {model} gave no readable verdict after a retry: {cause}")


class JudgeCache(Protocol):
    """Where verdicts are kept: the golden store implements this; so does MemoryJudgeCache."""

    def get(self, key: str) -> JudgeVerdict | None: ...

    def put(self, key: str, verdict: JudgeVerdict) -> None: ...


class MemoryJudgeCache:
    """A dict-backed verdict cache: for tests and for one process's reuse."""

    def __init__(self) -> None:
        self.data: dict[str, JudgeVerdict] = {}

    def get(self, key: str) -> JudgeVerdict | None:
        return self.data.get(key)

    def put(self, key: str, verdict: JudgeVerdict) -> None:
        self.data[key] = dict(verdict)


def judge_key(model: str, mode: str, candidate: str, reference: str, question: str | None) -> str:
    """Cache key: hash of judge model, mode, prompt version and the texts judged."""
    parts = [model, mode, TEMPLATE_VERSION, candidate, reference, question or ""]
    digest = hashlib.sha256(dumps(parts, hidden=False).encode()).hexdigest()
    return f"judge-{digest[:32]}"


def clip(text: str, limit: int) -> str:
    """Cut an answer for the prompt, with a marker the judge can see."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


class JudgeScorer(Scorer):
    """Asks a judge model whether the candidate is as good as the reference.

    ``mode="grade"``: the judge grades the candidate 1-10 against the reference; value is
    (grade - 1) / 9. ``mode="pairwise"``: the judge compares candidate and reference twice, in
    both orders, to cancel position bias; each verdict scores 1 (candidate better), 0.5 (tie) or
    0 (worse) and the value is their mean, so 0.5 means "as good as the reference". A judge answer
    with no readable verdict is asked again once, with a reminder of the form; a second unreadable
    answer raises :class:`JudgeUnjudged`: the pair has no verdict (never a 0) and nothing is cached.
    Answers longer than ``max_answer_chars`` are cut in the prompt (never in the cache key).
    """

    name = "judge"
    about = About(
        JUDGE, frozenset({"question", "model"}), False, AT_LEAST["grade"], tuple(AT_LEAST.items())
    )

    def __init__(
        self,
        *,
        complete: Complete,
        mode: str = "grade",
        model: str = "judge",
        question: str | None = None,
        cache: JudgeCache | None = None,
        max_answer_chars: int = 12_000,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"judge scorer: mode must be one of {MODES}, not {mode!r}")
        if not callable(complete):
            raise ValueError("judge scorer: complete must be a callable(messages) -> str")
        self.complete, self.mode, self.model = complete, mode, model
        self.question, self.cache, self.max_answer_chars = question, cache, max_answer_chars

    def score(
        self,
        candidate: str,
        reference: str,
        *,
        question: str | None = None,
        cache: JudgeCache | None = None,
    ) -> Score:
        """Judge one pair. ``question`` and ``cache`` override the scorer's own for this pair:
        the plugin builds one scorer per test and keeps each pair's verdict with its golden record.
        """
        question = question if question is not None else self.question
        cache = cache if cache is not None else self.cache
        empty = empty_verdict(self, candidate, reference)
        if empty is not None:
            return empty
        key = judge_key(self.model, self.mode, candidate, reference, question)
        cached = cache.get(key) if cache is not None else None
        if _replayable(cached):
            return self.verdict(cached["value"], f"{cached['explanation']} (cached verdict)")
        try:
            verdict = self._judge(candidate, reference, question)
        except JudgeUnparseable as err:
            raise JudgeUnjudged(self.model, err) from None
        if cache is not None:
            cache.put(key, verdict)
        return self.verdict(verdict["value"], verdict["explanation"])

    def _ask(self, prompt: str, earlier: str | None = None) -> str:
        """One judge call; with ``earlier`` (its unreadable answer), the reminder follows it."""
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        if earlier is not None:
            messages += [
                {"role": "assistant", "content": earlier},
                {"role": "user", "content": REMINDER[self.mode]},
            ]
        try:
            answer = self.complete(messages)
        except ScorerError:
            raise
        except Exception as err:
            raise ScorerUnavailable(
                f"judge {self.model!r} could not be asked: {type(err).__name__}: {err}"
            ) from None
        return answer if isinstance(answer, str) else ""

    def _judge(self, candidate: str, reference: str, question: str | None) -> JudgeVerdict:
        """Ask the judge (once, or twice for pairwise) and build the verdict to cache."""
        fill = {"question": question or NO_QUESTION}
        cand, ref = clip(candidate, self.max_answer_chars), clip(reference, self.max_answer_chars)
        # the candidate text makes a cached verdict a labelled pair for ``slam calibrate``
        head = {
            "judge": self.model,
            "mode": self.mode,
            "template": TEMPLATE_VERSION,
            "candidate": candidate,
        }
        if self.mode == "grade":
            return head | self._grade(GRADE_PROMPT.format(reference=ref, candidate=cand, **fill))
        first = PAIR_PROMPT.format(a=cand, b=ref, **fill)
        return head | self._pairwise(first, PAIR_PROMPT.format(a=ref, b=cand, **fill))

    def _ask_parsed(self, prompt: str, parse: Callable[[str], T]) -> tuple[list[str], T]:
        """The judge's answers and the verdict read from them: asked again once if unreadable."""
        answer = self._ask(prompt)
        try:
            return [answer], parse(answer)
        except JudgeUnparseable:
            again = self._ask(prompt, earlier=answer)
            return [answer, again], parse(again)  # a second JudgeUnparseable propagates

    def _grade(self, prompt: str) -> JudgeVerdict:
        answers, grade = self._ask_parsed(prompt, parse_grade)
        why = f"judge {self.model} graded {grade:g}/10: {preview(answers[-1], 160)}"
        return {"value": (grade - 1) / 9, "grade": grade, "explanation": why, "answers": answers}

    def _pairwise(self, candidate_first: str, candidate_second: str) -> JudgeVerdict:
        first, pref_a = self._ask_parsed(candidate_first, parse_preference)
        second, pref_b = self._ask_parsed(candidate_second, parse_preference)
        answers = first + second
        outcomes = [_outcome(pref_a, "A"), _outcome(pref_b, "B")]
        return {
            "value": sum(POINTS[o] for o in outcomes) / 2,
            "outcomes": outcomes,
            "explanation": _pair_explanation(self.model, outcomes),
            "answers": answers,
        }


def asking_through(scorer: object, complete: Complete) -> JudgeScorer | None:
    """A copy of ``scorer`` that asks its judge through ``complete``, its messages built by its own
    code (run/test/judge_ahead.py asks them ahead of the test's check); None when it is not this
    package's judge scorer, whose requests are the only ones known ahead for certain."""
    if not isinstance(scorer, JudgeScorer):
        return None
    twin = copy.copy(scorer)
    twin.complete = complete
    return twin


def _replayable(verdict: object) -> TypeGuard[JudgeVerdict]:
    """A cached verdict is replayed only when whole; a damaged one is asked again."""
    return (
        isinstance(verdict, dict)
        and isinstance(verdict.get("value"), int | float)
        and isinstance(verdict.get("explanation"), str)
    )


def _outcome(preference: str, candidate_slot: str) -> str:
    """The candidate's result from one verdict, given which slot (A or B) it sat in."""
    if preference == "tie":
        return "tie"
    return "win" if preference == candidate_slot else "loss"


def _pair_explanation(model: str, outcomes: list[str]) -> str:
    as_a, as_b = outcomes
    text = f"judge {model} pairwise: candidate as A {as_a}, as B {as_b}"
    if {as_a, as_b} == {"win", "loss"}:
        text += " (the judge preferred the same position both times: position bias, a tie)"
    return text
