"""Text scorers: exact, normalized, fuzzy, length, label and containment.

These are the cheap, deterministic scorers: they need no model and run anywhere, so a suite can
gate on them in CI without network or GPU.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from pytest_slam.compare.about import EXACT_MATCH, SIMILAR
from pytest_slam.compare.scorer import Scorer, empty_verdict, preview
from pytest_slam.records import Score


def _first_difference(a: str, b: str) -> int:
    """Index of the first character where ``a`` and ``b`` differ."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


class ExactScorer(Scorer):
    """1 when the answers are identical, character for character; else 0."""

    name = "exact"
    about = EXACT_MATCH

    def score(self, candidate: str, reference: str) -> Score:
        if candidate == reference:
            return self.verdict(1.0, "identical")
        empty = empty_verdict(self, candidate, reference)
        if empty is not None:
            return empty
        i = _first_difference(candidate, reference)
        return self.verdict(
            0.0,
            f"first difference at char {i}: candidate {preview(candidate[i : i + 30])}, "
            f"reference {preview(reference[i : i + 30])}",
        )


class NormalizedScorer(Scorer):
    """Exact match after normalizing Unicode (NFKC), case, punctuation and whitespace.

    Each normalization can be switched off; all are on by default because a model that writes
    "Paris." where the reference says "paris" gave the same answer.
    """

    name = "normalized"
    about = EXACT_MATCH

    def __init__(
        self,
        *,
        case: bool = True,
        whitespace: bool = True,
        punctuation: bool = True,
        unicode: bool = True,
    ) -> None:
        self.case, self.whitespace = case, whitespace
        self.punctuation, self.unicode = punctuation, unicode

    def normalize(self, text: str) -> str:
        """The text as this scorer compares it."""
        if self.unicode:
            text = unicodedata.normalize("NFKC", text)
        if self.case:
            text = text.casefold()
        if self.punctuation:
            text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
        if self.whitespace:
            text = " ".join(text.split())
        return text

    def score(self, candidate: str, reference: str) -> Score:
        cand, ref = self.normalize(candidate), self.normalize(reference)
        if cand == ref:
            return self.verdict(1.0, "equal after normalization")
        empty = empty_verdict(self, cand, ref)
        if empty is not None:
            return empty
        i = _first_difference(cand, ref)
        return self.verdict(
            0.0,
            f"normalized answers differ at char {i}: candidate {preview(cand[i : i + 30])}, "
            f"reference {preview(ref[i : i + 30])}",
        )


FUZZY_METHODS = (
    "ratio",
    "partial_ratio",
    "token_sort_ratio",
    "token_set_ratio",
    "WRatio",
    "QRatio",
)


class FuzzyScorer(Scorer):
    """rapidfuzz similarity / 100, on lowercased text with punctuation stripped.

    The default is ``token_sort_ratio``: word order does not matter (models reorder lists and
    clauses), but missing or extra words do. ``token_set_ratio`` is available but scores 1.0
    whenever one answer's words are a subset of the other's, so a truncated or one-word answer
    would look perfect; that is why it is not the default.
    """

    name = "fuzzy"
    about = SIMILAR

    def __init__(self, *, method: str = "token_sort_ratio", preprocess: bool = True) -> None:
        if method not in FUZZY_METHODS:
            raise ValueError(
                f"fuzzy scorer: unknown method {method!r}; choose one of {', '.join(FUZZY_METHODS)}"
            )
        from rapidfuzz import fuzz, utils

        self.method = method
        self._func = getattr(fuzz, method)
        self._processor = utils.default_process if preprocess else None

    def score(self, candidate: str, reference: str) -> Score:
        empty = empty_verdict(self, candidate, reference)
        if empty is not None:
            return empty
        ratio = self._func(candidate, reference, processor=self._processor)
        return self.verdict(ratio / 100.0, f"{self.method} {ratio:.1f}/100")


class LengthScorer(Scorer):
    """The shorter answer's length over the longer's, in characters.

    Says nothing about content, so it is no verdict on its own; its use is a calibrated fail band:
    on long open-ended answers an answer far shorter (or longer) than the reference's is mostly a
    worse one, and ``slam calibrate`` certifies that band where the labels show it (bench/README.md
    section 10: on AlpacaEval it decides more pairs than any fuzzy method at the same error).
    """

    name = "length"
    about = SIMILAR

    def score(self, candidate: str, reference: str) -> Score:
        empty = empty_verdict(self, candidate, reference)
        if empty is not None:
            return empty
        c, r = len(candidate.strip()), len(reference.strip())
        side = "shorter" if c < r else "longer"
        return self.verdict(
            min(c, r) / max(c, r), f"candidate {c} chars, {side} than the reference's {r}"
        )


class LabelScorer(Scorer):
    """1 when both answers name the same single class out of ``choices``; else 0 with a reason.

    Matching is case-insensitive on word boundaries, so "Positive." names ``positive`` and
    "positively" does not. When one choice contains another ("very positive" and "positive"),
    a mention inside the longer one counts only for the longer one.
    """

    name = "label"
    about = EXACT_MATCH

    def __init__(self, *, choices: Sequence[str]) -> None:
        if isinstance(choices, str) or not choices:
            raise ValueError(
                "label scorer: choices must be a non-empty list of class names, "
                'e.g. choices=["positive", "negative", "neutral"]'
            )
        self.choices = [str(c) for c in choices]
        self._patterns = [
            re.compile(rf"(?<!\w){re.escape(c)}(?!\w)", re.IGNORECASE) for c in self.choices
        ]

    def labels_in(self, text: str) -> list[str]:
        """The choices ``text`` names, longest mention winning where mentions overlap."""
        spans = [
            (m.start(), m.end(), choice)
            for choice, pattern in zip(self.choices, self._patterns, strict=True)
            for m in pattern.finditer(text)
        ]
        found: list[str] = []
        for start, end, choice in spans:
            inside_longer = any(
                s <= start and end <= e and (e - s) > (end - start) for s, e, _ in spans
            )
            if not inside_longer and choice not in found:
                found.append(choice)
        return found

    def _single(self, text: str, who: str) -> tuple[str | None, str]:
        found = self.labels_in(text)
        if len(found) == 1:
            return found[0], ""
        if not found:
            return None, f"{who} names none of {self.choices}: {preview(text)}"
        return None, f"{who} is ambiguous: names {' and '.join(found)}"

    def score(self, candidate: str, reference: str) -> Score:
        ref_label, why = self._single(reference, "reference")
        if ref_label is None:
            return self.verdict(0.0, why)
        cand_label, why = self._single(candidate, "candidate")
        if cand_label is None:
            return self.verdict(0.0, why)
        if cand_label == ref_label:
            return self.verdict(1.0, f"both say {cand_label}")
        return self.verdict(0.0, f"candidate says {cand_label}, reference says {ref_label}")


ARTICLES = frozenset({"a", "an", "the"})


_NORMALIZED = NormalizedScorer()  # NFKC, case folded, punctuation as spaces


def answer_words(text: str) -> list[str]:
    """The words of a short answer as SQuAD's evaluation compares them: normalized as
    ``NormalizedScorer`` does, symbols read as spaces too, the articles a, an and the left out."""
    text = _NORMALIZED.normalize(text)
    text = "".join(" " if unicodedata.category(ch)[0] == "S" else ch for ch in text)
    return [w for w in text.split() if w not in ARTICLES]


def _run_in(needle: list[str], words: list[str]) -> bool:
    """Whether ``needle`` (not empty) is a run of consecutive ``words``."""
    n = len(needle)
    if not n or n > len(words):
        return False
    first = needle[0]
    return any(
        w == first and words[i : i + n] == needle for i, w in enumerate(words[: 1 - n or None])
    )


class ContainmentScorer(Scorer):
    """Short answers: 1 when the reference's words appear in the candidate as one run (or the
    candidate's in the reference's); else the share of the reference's words the candidate has,
    at most 0.99.

    Made for a short golden answer ("Wilhelm Conrad Röntgen") met by a sentence that says it ("The
    first Nobel Prize in Physics was awarded in 1901 to Wilhelm Conrad Röntgen"): fuzzy ratios
    punish the sentence's extra words, this reads only whether the answer is in it. Words are
    compared as SQuAD's evaluation does (:func:`answer_words`). ``alternatives`` splits the
    reference into acceptable answers, the best one counting (Natural Questions' gold answers
    are written "the Mishnah/the Gemara"); the separator between two digits (1/2, 24/7) does not
    split; ``""`` keeps the reference whole. Evidence for calibrated bands only: on EVOUNA-NQ's
    gold answers a pass band at 0.51 decides 63.5% of held-out pairs at a pass error of 0.036,
    against fuzzy token_set's 55.5% (bench/README.md section 30). The gain is the alternatives:
    with the reference kept whole it ties token_set, and a golden answer recorded from a model
    has none.
    """

    name = "containment"
    about = SIMILAR

    def __init__(self, *, alternatives: str = "/") -> None:
        self.alternatives = alternatives
        sep = re.escape(alternatives)
        self._split = re.compile(rf"(?<!\d){sep}|{sep}(?!\d)") if alternatives else None

    def answers(self, reference: str) -> list[list[str]]:
        """The reference's acceptable answers, each as its words (none: no words in it)."""
        parts = self._split.split(reference) if self._split is not None else [reference]
        return [words for words in map(answer_words, parts) if words]

    def score(self, candidate: str, reference: str) -> Score:
        empty = empty_verdict(self, candidate, reference)
        if empty is not None:
            return empty
        answers = self.answers(reference)
        if not answers:
            return self.verdict(0.0, f"the reference has no words to find: {preview(reference)}")
        words = answer_words(candidate)
        for answer in answers:
            if _run_in(answer, words):
                return self.verdict(1.0, f"the candidate says {preview(' '.join(answer))}")
            if _run_in(words, answer):
                return self.verdict(1.0, f"the reference says {preview(' '.join(words))}")
        has = set(words)
        counted = [(sum(w in has for w in a), a) for a in answers]
        found, answer = max(counted, key=lambda f: f[0] / len(f[1]))
        return self.verdict(
            min(found / len(answer), 0.99),
            f"{found} of the reference's {len(answer)} words in the candidate"
            f" ({preview(' '.join(answer))})",
        )
