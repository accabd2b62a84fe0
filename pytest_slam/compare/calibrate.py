"""``slam calibrate``: choose the equivalence threshold from labelled pairs, with the figures.

A similarity threshold is a guess until it is checked against verdicts people trust. Where the labels
come from (judge verdicts in the goldens, human verdicts, a JSON Lines file) is the command's business,
in ``pytest_slam.cli.calibrate``; this module only measures. For each cheap scorer it
measures kappa, AUC, Spearman and the false-pass rate with bootstrap intervals resampled by request,
chooses the scorer whose threshold holds best on requests it was not chosen on (5-fold by request),
and writes ``[tool.slam.equivalence]`` with the figures as a comment. Too few labels: it refuses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_slam.compare.judge import JudgeVerdict
from pytest_slam.compare.validity import (
    Estimate,
    auc,
    best_threshold,
    bootstrap_measure,
    cohen_kappa,
    false_pass_rate,
    spearman,
    verdicts,
)

MIN_PAIRS = 40
MIN_EACH = 10  # of "equivalent" and of "not equivalent"
GOOD_GRADE = 7  # a judge grade (1-10) at or above this means "as good as the reference"
FOLDS = 5
CANDIDATES: dict[str, dict[str, str]] = {  # name -> fuzzy options
    "fuzzy token_sort_ratio": {"method": "token_sort_ratio"},
    "fuzzy ratio": {"method": "ratio"},
    "fuzzy token_set_ratio": {"method": "token_set_ratio"},
}


class CalibrationRefused(Exception):
    """Too few labels, or nothing to write: the message says what is needed."""


@dataclass
class LabelledPair:
    unit: str  # the request (golden key): the bootstrap and cross-validation unit
    candidate: str
    reference: str
    label: int  # 1: equivalent
    grade: float  # the graded signal in 0..1, for Spearman


@dataclass
class Figures:
    """One scorer's agreement with the labels."""

    scorer: str
    options: dict[str, str]
    threshold: float
    kappa: Estimate
    kappa_held_out: float  # threshold chosen on the other folds
    auc: Estimate
    spearman: Estimate
    false_pass: Estimate
    pairs: int

    def line(self) -> str:
        return (f"{self.scorer} >= {self.threshold:.2f}: kappa {self.kappa} (held out "
                f"{self.kappa_held_out:.2f}), false-pass {self.false_pass}, AUC {self.auc}, "
                f"Spearman {self.spearman}, {self.pairs} pairs")  # fmt: skip


def verdict_label(verdict: JudgeVerdict) -> tuple[int, float] | None:
    """(label, graded value) of a cached judge verdict, or None when it is not usable."""
    value = verdict.get("value")
    if not isinstance(value, int | float) or not isinstance(verdict.get("candidate"), str):
        return None
    if verdict.get("mode") == "pairwise":
        return int(value >= 0.5), float(value)
    grade = verdict.get("grade")
    return (int(grade >= GOOD_GRADE), float(value)) if isinstance(grade, int | float) else None


def check_enough(pairs: Sequence[LabelledPair]) -> None:
    """Refuse with the counts it needs, and how to get them."""
    good = sum(p.label for p in pairs)
    if len(pairs) >= MIN_PAIRS and min(good, len(pairs) - good) >= MIN_EACH:
        return
    raise CalibrationRefused(
        f"slam calibrate needs at least {MIN_PAIRS} labelled pairs with {MIN_EACH} of each verdict; "
        f"found {len(pairs)} ({good} equivalent, {len(pairs) - good} not). Cache judge verdicts "
        "with [tool.slam] judge, equivalence = { by = 'judge' } and pytest --slm-record=new, "
        "or pass human verdicts with --labels FILE.jsonl"
    )


def measure(pairs: Sequence[LabelledPair], name: str, options: dict[str, str],
            resamples: int = 1000) -> Figures:  # fmt: skip
    """One scorer's figures: threshold chosen on all pairs, kappa also held out by request."""
    from pytest_slam.compare.registry import get_scorer

    scorer = get_scorer("fuzzy", **options)
    scores = [scorer.score(p.candidate, p.reference).value for p in pairs]
    labels, grades, units = (
        [p.label for p in pairs],
        [p.grade for p in pairs],
        [p.unit for p in pairs],
    )
    threshold = round(best_threshold(scores, labels), 2)

    passed = verdicts(scores, threshold)
    return Figures(
        name, options, threshold,
        bootstrap_measure(units, cohen_kappa, passed, labels, resamples=resamples),
        held_out_kappa(scores, labels, units),
        bootstrap_measure(units, auc, scores, labels, resamples=resamples),
        bootstrap_measure(units, spearman, scores, grades, resamples=resamples),
        bootstrap_measure(units, false_pass_rate, passed, labels, resamples=resamples),
        len(pairs),
    )  # fmt: skip


def held_out_kappa(scores: list[float], labels: list[int], units: list[str]) -> float:
    """Kappa of verdicts whose threshold was chosen without their request (5 folds by request)."""
    ordered = sorted(set(units))
    fold = {u: i % FOLDS for i, u in enumerate(ordered)}
    passed = [0] * len(scores)
    for k in range(FOLDS):
        train = [i for i, u in enumerate(units) if fold[u] != k]
        if not train or len({labels[i] for i in train}) < 2:
            continue
        t = best_threshold([scores[i] for i in train], [labels[i] for i in train])
        for i, u in enumerate(units):
            if fold[u] == k:
                passed[i] = int(scores[i] >= t)
    return cohen_kappa(passed, labels)


def calibrate(pairs: Sequence[LabelledPair], resamples: int = 1000) -> list[Figures]:
    """Every candidate scorer's figures, best held-out kappa first."""
    check_enough(pairs)
    found = [measure(pairs, name, opts, resamples) for name, opts in CANDIDATES.items()]
    return sorted(found, key=lambda f: -f.kappa_held_out if not math.isnan(f.kappa_held_out) else 0)


def table_text(best: Figures, others: Sequence[Figures]) -> str:
    """The ``[tool.slam.equivalence]`` table, with the figures that justify it as comments."""
    lines = ["[tool.slam.equivalence]", "# chosen by `slam calibrate` on labelled pairs:"]
    lines += [f"#   {f.line()}" for f in [best, *others]]
    lines += [
        'by = "fuzzy"',
        f'method = "{best.options["method"]}"',
        f"at_least = {best.threshold}",
    ]
    return "\n".join(lines) + "\n"
