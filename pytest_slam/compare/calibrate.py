"""``slam calibrate``: choose the equivalence threshold from labelled pairs, with the figures.

A similarity threshold is a guess until it is checked against verdicts people trust. The labels
come from the judge verdicts cached in the golden files (each keeps the candidate text it judged:
a grade of 7 or more, or a pairwise score of 0.5 or more, is "equivalent"), from the human verdicts
of ``slam review`` on a run's answers (``--report``: "win" or "tie" is "equivalent"), or from a
JSON Lines file of verdicts (``{"candidate", "reference", "label", "unit"}``). For each cheap scorer it
measures kappa, AUC, Spearman and the false-pass rate with bootstrap intervals resampled by request,
chooses the scorer whose threshold holds best on requests it was not chosen on (5-fold by request),
and writes ``[tool.slam.equivalence]`` with the figures as a comment. Too few labels: it refuses.
"""

from __future__ import annotations

import argparse
import json
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
CANDIDATES: dict[str, dict[str, Any]] = {  # name -> fuzzy options
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
    options: dict[str, Any]
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


def verdict_label(verdict: dict[str, Any]) -> tuple[int, float] | None:
    """(label, graded value) of a cached judge verdict, or None when it is not usable."""
    value = verdict.get("value")
    if not isinstance(value, int | float) or not isinstance(verdict.get("candidate"), str):
        return None
    if verdict.get("mode") == "pairwise":
        return int(value >= 0.5), float(value)
    grade = verdict.get("grade")
    return (int(grade >= GOOD_GRADE), float(value)) if isinstance(grade, int | float) else None


def pairs_from_goldens(root: Path) -> list[LabelledPair]:
    """Labelled pairs from every judge verdict cached in the golden files under ``root``."""
    from pytest_slam.golden.fileformat import GoldenError, read_golden

    out = []
    for path in sorted(root.rglob("*.json")) if root.is_dir() else []:
        try:
            golden = read_golden(path)
        except GoldenError:
            continue
        for rec in golden.entries.values():
            reference = rec.answers[0].text if rec.answers else ""
            for verdict in rec.judge.values():
                found = verdict_label(verdict) if isinstance(verdict, dict) else None
                if found is not None:
                    out.append(LabelledPair(rec.key, verdict["candidate"], reference, *found))
    return out


HUMAN_LABELS = {"win": 1, "tie": 1, "loss": 0, "both_bad": 0}  # the candidate's point of view


def pairs_from_reviews(report: Path, root: Path, reference: str) -> list[LabelledPair]:
    """Human verdicts from ``slam review`` (beside the goldens), matched to the report's answers.

    A verdict names the candidate answer by hash; the report holds the text. "win" and "tie" are
    "equivalent"; each reviewer's verdict is one labelled pair.
    """
    from pytest_slam.review.commands import load
    from pytest_slam.review.verdicts import all_verdicts

    try:
        store, pairs, _ = load(argparse.Namespace(report=report, root=root, reference=reference))
    except SystemExit as exc:
        raise CalibrationRefused(str(exc)) from None
    by_answer = {(p.key, p.model, p.answer_hash): p for p in pairs}
    out = []
    for verdicts_ in all_verdicts(store).values():
        for v in verdicts_:
            pair = by_answer.get((v.key, v.model, v.answer_hash))
            if pair is not None:
                label = HUMAN_LABELS[v.verdict]
                out.append(LabelledPair(v.key, pair.candidate, pair.reference, label, label))
    return out


def pairs_from_jsonl(path: Path) -> list[LabelledPair]:
    """Human (or any) verdicts: one JSON object a line with candidate, reference, label[, unit]."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not {"candidate", "reference", "label"} <= set(row):
            raise CalibrationRefused(f"{path}:{n}: needs candidate, reference and label")
        label = int(bool(row["label"]))
        out.append(LabelledPair(str(row.get("unit", n)), row["candidate"], row["reference"],
                                label, float(row.get("grade", label))))  # fmt: skip
    return out


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


def measure(pairs: Sequence[LabelledPair], name: str, options: dict[str, Any],
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


def write_table(pyproject: Path, text: str) -> None:
    """Put the table in pyproject.toml in place of any earlier equivalence setting, and check it."""
    old = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
    current = (tomllib.loads(old).get("tool", {}).get("slam", {}) if old else {}).get("equivalence")
    if current is not None and "[tool.slam.equivalence]" not in old:
        raise CalibrationRefused(
            f"{pyproject} sets [tool.slam] equivalence inline; remove that line and run again, "
            f"or paste this table yourself:\n{text}"
        )
    new = _replace_table(old, text) if current is not None else old.rstrip("\n") + "\n\n" + text
    tomllib.loads(new)  # never write a file that no longer parses
    pyproject.write_text(new.lstrip("\n"), encoding="utf-8")


def _replace_table(old: str, text: str) -> str:
    lines = old.splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "[tool.slam.equivalence]")
    while start > 0 and lines[start - 1].startswith(("#   ", "# chosen by `slam calibrate`")):
        start -= 1  # the previous run's figures go with its table
    end = start + 1
    while end < len(lines) and not lines[end].lstrip().startswith("["):
        end += 1
    return "".join(lines[:start]) + text + ("\n" if end < len(lines) else "") + "".join(lines[end:])


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--labels", type=Path, help="JSON Lines of human verdicts instead")
    parser.add_argument("--report", type=Path, help="a run's JSON report: calibrate on the "
                        "human verdicts `slam review` stored for its answers")  # fmt: skip
    parser.add_argument("--pyproject", type=Path, default=Path("pyproject.toml"))
    parser.add_argument("--dry-run", action="store_true", help="print the table, write nothing")
    parser.add_argument("--resamples", type=int, default=1000)
    return parser


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Measure, choose, and write (or print) the threshold; exit 2 when it refuses."""
    try:
        if args.labels:
            pairs = pairs_from_jsonl(args.labels)
        elif args.report:
            pairs = pairs_from_reviews(args.report, args.root, args.reference)
        else:
            pairs = pairs_from_goldens(args.root)
        ranked = calibrate(pairs, args.resamples)
        text = table_text(ranked[0], ranked[1:])
        print(text, end="")
        if not args.dry_run:
            write_table(args.pyproject, text)
            print(f"written to {args.pyproject}")
    except CalibrationRefused as exc:
        print(f"slam calibrate: {exc}")
        return 2
    return 0
