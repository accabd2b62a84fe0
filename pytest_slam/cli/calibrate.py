"""``slam calibrate``: gather labelled pairs, measure them (``compare.calibrate``), write the table.

The labels come from the judge verdicts cached in the golden files (each keeps the candidate text it
judged: a grade of 7 or more, or a pairwise score of 0.5 or more, is "equivalent"), from the human
verdicts of ``slam review`` on a run's answers (``--report``: "win" or "tie" is "equivalent"), or
from a JSON Lines file of verdicts (``{"candidate", "reference", "label", "unit"}``).
"""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path

from pytest_slam.compare.calibrate import (
    CalibrationRefused,
    LabelledPair,
    calibrate,
    table_text,
    verdict_label,
)
from pytest_slam.golden.fileformat import GoldenError, read_golden
from pytest_slam.review.verdicts import all_verdicts


def pairs_from_goldens(root: Path) -> list[LabelledPair]:
    """Labelled pairs from every judge verdict cached in the golden files under ``root``."""
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
    from pytest_slam.cli.review import load

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
                        "human verdicts 'slam review' stored for its answers")  # fmt: skip
    parser.add_argument("--pyproject", type=Path, default=Path("pyproject.toml"),
                        help="file to write the table to (default %(default)s)")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="print the table, write nothing")
    parser.add_argument("--resamples", type=int, default=1000,
                        help="bootstrap resamples for the intervals (default %(default)s)")  # fmt: skip
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
