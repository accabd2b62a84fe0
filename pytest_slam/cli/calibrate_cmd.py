"""``slam calibrate``: certified bands from the project's labels, written to pyproject.toml.

    slam calibrate [--labels FILE.jsonl | --report RUN.json] [--max-pass-error 0.05]
                   [--max-fail-error 0.10] [--confidence 0.95] [--min-count 20] [--dry-run]
    slam calibrate --evaluate [LABELS.jsonl] [--report RUN.json] [--format text|json]

The first form chooses the bands (``compare.calibrate``) and prints the table once, its figures
and the plain ``fuzzy token_sort >= 0.7`` row as comments above it, then writes it
(``calibrate_toml``). The second measures the whole verdict pyproject.toml configures now, the
judge included (``compare.evaluation``), on labels it was not calibrated on: a labels file, or
without one the human verdicts ``slam review`` stored for a run's answers (``--report``). The
judge is ``[tool.slam] judge``, asked directly; its verdicts are kept in ``.slam/judge`` beside the
golden files (keyed as the run keys them), and semantic embeddings in ``.slam/embeddings``, so a
second calibration or evaluation on the same labels recomputes nothing. ``--progress`` (or a
terminal on stderr) prints what is being scored, on stderr. Every bad input is one line naming it
and the fix, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

from pytest_slam.cli import exits
from pytest_slam.cli.calibrate_labels import (
    pairs_from_goldens,
    pairs_from_jsonl,
    pairs_from_reviews,
)
from pytest_slam.cli.calibrate_toml import (
    check_target,
    current,
    expected,
    kept_keys,
    read_pyproject,
    table_text,
    toml_value,
    write_table,
)
from pytest_slam.compare.bandselect import Targets
from pytest_slam.compare.calibrate import (
    SCORERS,
    Aids,
    CalibrationRefused,
    LabelledPair,
    available_scorers,
    calibrate,
)
from pytest_slam.compare.diskcache import DiskCache
from pytest_slam.compare.evaluation import (
    JudgeSetup,
    evaluate,
    evaluation_text,
    judge_error_table,
)
from pytest_slam.compare.needed import needs_lines
from pytest_slam.compare.policy import reaches_scorer
from pytest_slam.settings import Settings
from pytest_slam.util.files import scratch_folder

MIN_RESAMPLES = 100
SIDES = (("equivalent", "pass"), ("different", "fail"))  # a need's side, its certification key


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
        nargs="?",
        const="",
        metavar="LABELS",
        help="measure the current configuration, judge included, on these labelled pairs "
        "(JSON Lines; without a file: --labels, --report's reviews, or the cached judge verdicts); "
        "writes nothing",
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
    parser.add_argument(
        "--modules",
        help="comma-separated test modules (tests/test_faq.py) the labels stand for besides their "
        "own: the bands decide those modules' pairs too (default: only the labels' modules)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the table, write nothing")
    parser.add_argument(
        "--progress",
        action="store_true",
        help="say what is being scored, on stderr (on by default when stderr is a terminal)",
    )
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


def covered(args: argparse.Namespace) -> list[str]:
    """``--modules``: each a test module of the project (a file under pyproject.toml's folder)."""
    names = [n.strip() for n in (args.modules or "").split(",") if n.strip()]
    root = Path(args.pyproject).resolve().parent
    for name in names:
        if not name.endswith(".py") or not (root / name).is_file():
            raise CalibrationRefused(
                f"--modules {name}: no such test module in {root}; name a test file by its path "
                "from the project's folder (tests/test_faq.py), as the labels' module does"
            )
    return names


def check_label_modules(pairs: list[LabelledPair], args: argparse.Namespace, what: str) -> None:
    """Labels whose modules are all missing from the project were made for another one: bands
    measured on them would decide none of its pairs (or, scoped wrongly, every pair)."""
    named = sorted({p.module for p in pairs if p.module})
    root = Path(args.pyproject).resolve().parent
    if named and not any((root / m).is_file() for m in named):
        shown = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
        raise CalibrationRefused(
            f"{what}: its labels' modules ({shown}) match no test module in {root}; give each "
            "label the path of its test file from the project's folder (tests/test_qa.py)"
        )


def label_source(args: argparse.Namespace) -> str:
    """Where the labels came from, as a calibration's domain names it."""
    if args.labels:
        return f"labels {Path(args.labels).name}"
    if args.report:
        return f"reviews of {Path(args.report).name}"
    return "cached judge verdicts"


def scratch(args: argparse.Namespace) -> Path:
    """pytest-slam's scratch folder beside the golden files (``.slam``, git-ignored)."""
    return scratch_folder(args.root)


def aids_of(args: argparse.Namespace) -> Aids:
    """The embeddings cache, and progress lines on stderr when asked or on a terminal."""
    shown = args.progress or sys.stderr.isatty()
    say = (
        (lambda line: print(f"slam calibrate: {line}", file=sys.stderr, flush=True))
        if shown
        else None
    )
    return Aids(DiskCache(scratch(args) / "embeddings"), say)


def judge_of(args: argparse.Namespace) -> JudgeSetup | None:
    """``[tool.slam] judge`` as the evaluation's judge (None when none is set)."""
    settings: Settings | None = getattr(args, "settings", None)
    if settings is None or not settings.judge:
        return None
    from pytest_slam.run.score.judging import JudgeModel
    from pytest_slam.swap.limits import concurrency_of
    from pytest_slam.swap.models import resolve

    try:
        spec = resolve(settings.judge, settings.model_table)
    except ValueError as exc:
        raise CalibrationRefused(f"[tool.slam] judge = {settings.judge!r}: {exc}") from None
    if not spec.base_urls:
        raise CalibrationRefused(
            f"[tool.slam] judge = {settings.judge!r} has no running server to ask: start it and "
            "name it by URL (judge = 'http://127.0.0.1:8080/v1#MODEL')"
        )
    model = JudgeModel(spec)
    cache = DiskCache(scratch(args) / "judge")
    accept = bool(getattr(settings, "accept_uncertified_judge", False))
    setup = JudgeSetup(model.complete, spec.name, cache, accept)
    # the judge's pairs asked so many at a time: [tool.slam.models.X] or [tool.slam] concurrency
    setup.concurrency = concurrency_of(spec, None, settings.concurrency)
    return setup


def run_evaluate(args: argparse.Namespace) -> int:
    if args.evaluate:
        pairs = pairs_from_jsonl(Path(args.evaluate), "--evaluate")
        if not pairs:
            raise CalibrationRefused(f"--evaluate {args.evaluate}: no labelled pairs in it")
    else:
        pairs = labelled(args)
        if not pairs:
            raise CalibrationRefused(
                "--evaluate: no labelled pairs found; pass a labels file (--evaluate FILE.jsonl) "
                "or a run's report whose answers 'slam review' judged (--report RUN.json)"
            )
    targets = targets_of(args)
    if args.evaluate or args.labels:  # a file's modules; goldens' and reviews' are the project's
        check_label_modules(pairs, args, f"--evaluate {args.evaluate or args.labels}")
    _, doc = read_pyproject(args.pyproject)
    judge, aids = judge_of(args), aids_of(args)
    if judge is not None:
        judge.progress = aids.progress
    result = evaluate(pairs, current(doc) or {}, judge, targets, aids)
    source = args.evaluate or args.labels or args.report or "the cached judge verdicts"
    table = judge_error_table(result, f"{source}, {len(pairs)} labelled pairs, {date.today()}")
    if table is not None:
        result["judge_error"] = table
    print(json.dumps(result, indent=2) if args.format == "json" else evaluation_text(result))
    if args.format != "json":
        judged = result.get("judge") or {}
        sides = {("judge", s): bool(judged[k]) for s, k in SIDES if k in judged}
        print("\n".join(labels_needed(pairs, targets, args, result.get("evidence", {}), sides)))
    if table is not None and args.format != "json":
        print(
            "what a run needs to state the judge's measured error (and to leave a side that is "
            "not certified undecided), under [tool.slam.equivalence]:\n"
            f"judge_error = {toml_value(table)}"
        )
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    targets = targets_of(args)
    if not args.dry_run:
        check_target(args.pyproject)  # a path the table cannot go to: said before any work
    _, doc = read_pyproject(args.pyproject)  # a broken file is refused before any work
    covers = covered(args)
    pairs = labelled(args)
    if args.labels:  # a file's modules; the goldens' and the reviews' are the project's own
        check_label_modules(pairs, args, f"--labels {args.labels}")
    results = calibrate(
        pairs,
        targets,
        args.resamples,
        scorers_of(args),
        aids=aids_of(args),
        source=label_source(args),
        covers=covers,
    )
    kept = kept_keys(doc)
    text = table_text(results, targets, kept)
    if not args.dry_run:
        write_table(args.pyproject, text, expected(results, kept))
    print(text, end="")
    if not args.dry_run:
        print(f"written to {args.pyproject}")
    chosen = results[0].chosen  # the top-level bands: certified on which side
    bands = {
        ("bands", "equivalent"): chosen is not None and chosen.at_least is not None,
        ("bands", "different"): chosen is not None and bool(chosen.fail_below),
    }
    print("\n".join(labels_needed(pairs, targets, args, certified=bands)))
    return 0


def labels_needed(
    pairs: list[LabelledPair],
    targets: Targets,
    args: argparse.Namespace,
    evidence: dict[str, Any] | None = None,
    certified: dict[tuple[str, str], bool] | None = None,
) -> list[str]:
    """How many labelled pairs of each kind the bands and the judge need at these targets, how
    many there are, how many more to review (``compare.needed``). Only the pairs the bands or
    the judge could decide count: an identical answer or a blank side is settled before them."""
    pairs = [p for p in pairs if reaches_scorer(p.candidate, p.reference)]
    good = sum(p.label for p in pairs)
    judged = (evidence or {}).get("judge")
    called = (judged["equivalent"], judged["different"]) if judged else None
    sides = dict(certified or {})
    return needs_lines(targets, len(scorers_of(args)), good, len(pairs) - good, called, sides)


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Choose and write the bands, or measure the current ones; exit 2 on a bad input."""
    try:
        return run_evaluate(args) if args.evaluate is not None else run_calibrate(args)
    except CalibrationRefused as exc:
        return exits.refuse("calibrate", exc)
