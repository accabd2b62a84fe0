"""``slam calibrate``: certified bands from the project's labels, written to pyproject.toml.

    slam calibrate [--labels FILE.jsonl | --report RUN.json] [--max-pass-error 0.05]
                   [--max-fail-error 0.10] [--confidence 0.95] [--min-count 20] [--dry-run]
    slam calibrate --evaluate LABELS.jsonl [--format text|json]

The first form chooses the bands (``compare.calibrate``) and prints the table once, its figures
and the plain ``fuzzy token_sort >= 0.7`` row as comments above it, then writes it
(``calibrate_toml``). The second measures the configuration pyproject.toml holds now on labels it
was not calibrated on. Every bad input is one line naming it and the fix, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_slam.cli import exits
from pytest_slam.cli.calibrate_labels import (
    pairs_from_goldens,
    pairs_from_jsonl,
    pairs_from_reviews,
)
from pytest_slam.cli.calibrate_toml import (
    current,
    expected,
    kept_keys,
    read_pyproject,
    table_text,
    write_table,
)
from pytest_slam.compare.bandselect import Targets
from pytest_slam.compare.calibrate import (
    SCORERS,
    CalibrationRefused,
    LabelledPair,
    available_scorers,
    calibrate,
)
from pytest_slam.compare.evaluation import evaluate, evaluation_text

MIN_RESAMPLES = 100


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument(
        "--labels",
        type=Path,
        help="JSON Lines of labelled pairs (candidate, reference, label[, unit, module])",
    )
    parser.add_argument(
        "--report",
        type=Path,
        help="a run's JSON report: calibrate on the "
        "human verdicts 'slam review' stored for its answers",
    )
    parser.add_argument(
        "--evaluate",
        type=Path,
        metavar="LABELS",
        help="measure the current "
        "configuration on these labelled pairs (JSON Lines); writes nothing",
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="--evaluate's output"
    )
    parser.add_argument(
        "--pyproject",
        type=Path,
        default=Path("pyproject.toml"),
        help="file to write the table to (default %(default)s)",
    )
    parser.add_argument(
        "--max-pass-error",
        type=float,
        default=0.05,
        help="at most this share of the pairs called equivalent may be unacceptable (default 0.05)",
    )
    parser.add_argument(
        "--max-fail-error",
        type=float,
        default=0.10,
        help="at most this share of the pairs called different may be acceptable (default 0.10)",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="for both errors and every scorer tried together (default 0.95)",
    )
    parser.add_argument("--min-count", type=int, default=20, help="fewest pairs a band may hold")
    parser.add_argument(
        "--resamples",
        type=int,
        default=1000,
        help="bootstrap resamples (by prompt) for the chosen errors' second interval",
    )
    parser.add_argument(
        "--scorers",
        help="comma-separated, of: "
        + ", ".join(n.split()[-1] for n in SCORERS)
        + " (default: all installed)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the table, write nothing")
    return parser


def targets_of(args: argparse.Namespace) -> Targets:
    if args.resamples < MIN_RESAMPLES:
        raise CalibrationRefused(
            f"--resamples {args.resamples}: a 95% bootstrap interval needs at least "
            f"{MIN_RESAMPLES} resamples; pass --resamples 1000 (the default)"
        )
    if not 0.5 <= args.confidence < 1:
        raise CalibrationRefused(
            f"--confidence {args.confidence}: must be at least 0.5 and below 1; for example 0.95"
        )
    try:
        return Targets(
            args.max_pass_error, args.max_fail_error, 1 - args.confidence, args.min_count
        )
    except ValueError as exc:
        raise CalibrationRefused(f"--{exc}") from None


def scorers_of(args: argparse.Namespace) -> dict[str, tuple[str, dict[str, str]]]:
    if not args.scorers:
        return available_scorers()
    names = [n.strip() for n in args.scorers.split(",") if n.strip()]
    found = available_scorers(names)
    missing = sorted(set(names) - {n.split()[-1] for n in found})
    if missing or not found:
        known = ", ".join(n.split()[-1] for n in available_scorers())
        raise CalibrationRefused(
            f"--scorers {args.scorers}: {', '.join(missing) or 'none given'} not available here; "
            f"choose from {known}"
        )
    return found


def labelled(args: argparse.Namespace) -> list[LabelledPair]:
    if args.labels:
        return pairs_from_jsonl(args.labels)
    if args.report:
        return pairs_from_reviews(args.report, args.root, args.reference)
    return pairs_from_goldens(args.root, args.reference)


def run_evaluate(args: argparse.Namespace) -> int:
    pairs = pairs_from_jsonl(args.evaluate, "--evaluate")
    if not pairs:
        raise CalibrationRefused(f"--evaluate {args.evaluate}: no labelled pairs in it")
    _, doc = read_pyproject(args.pyproject)
    result = evaluate(pairs, current(doc) or {})
    print(json.dumps(result, indent=2) if args.format == "json" else evaluation_text(result))
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    targets = targets_of(args)
    _, doc = read_pyproject(args.pyproject)  # a broken file is refused before any work
    results = calibrate(labelled(args), targets, args.resamples, scorers_of(args))
    kept = kept_keys(doc)
    text = table_text(results, targets, kept)
    if not args.dry_run:
        write_table(args.pyproject, text, expected(results, kept))
    print(text, end="")
    if not args.dry_run:
        print(f"written to {args.pyproject}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Choose and write the bands, or measure the current ones; exit 2 on a bad input."""
    try:
        return run_evaluate(args) if args.evaluate else run_calibrate(args)
    except CalibrationRefused as exc:
        return exits.refuse("calibrate", exc)
