"""``slam golden promote MODEL --report RUN.json`` and ``slam golden unpromote BASELINE``.

After a swap is adopted, the candidate's answers of a run become the reference's golden answers
(``golden.promote``): the next replay compares every later candidate with the adopted model. The
answers replaced are kept as a named baseline beside the goldens, and the command prints the one
line that puts them back. Mounted by the ``slam`` CLI with the other golden commands (``COMMANDS``);
each bad input is one line on stderr, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_slam.cli.golden import (
    _fail,
    add_store_arguments,
    say_recovered,
    store_reference,
    store_root,
)
from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.store import golden_reference, reference_slug

if TYPE_CHECKING:
    from pytest_slam.golden.journal import Transaction
    from pytest_slam.golden.promote import Promotion
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.records import Outcome
    from pytest_slam.report.jsonreport import Report

HELP = {
    "promote": "Make a candidate's answers in a run's JSON report the reference's golden answers, "
    "keeping the old ones as a named baseline",
    "unpromote": "Put back the golden answers a promote replaced (the baseline it printed)",
}


def add_promote_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_store_arguments(parser)
    parser.add_argument(
        "model",
        help="Candidate model whose answers become the reference's, "
        "as the report names it (e.g. smollm2-135m)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        required=True,
        metavar="RUN.json",
        help="JSON report of the run (written by --slm-report)",
    )
    parser.add_argument(
        "--baseline",
        metavar="NAME",
        help="Name to keep the replaced answers "
        "under (default: the reference and the UTC time, e.g. "
        "gpt-4@20261201T120000Z)",
    )
    parser.add_argument("--dry-run", action="store_true", help="List the entries, change none")
    return parser


def add_unpromote_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_store_arguments(parser)
    parser.add_argument("baseline", help="Baseline name a promote printed")
    return parser


def cmd_promote(args: argparse.Namespace) -> int:
    """Write the candidate's answers as the reference's; print the undo command.

    One store-wide transaction (``golden.journal``): the store lock is held from the first read to
    the last write, and a kill at any moment leaves the old store or the new one.
    """
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.report.jsonreport import ReportError, load_report

    try:
        report = load_report(args.report)
        _check_promotable(args, report)
        store = GoldenStore(store_root(args), run_reference(args, report.verdict.run.settings))
        with store.transaction("promote") as txn:
            say_recovered(store)
            done = _promote_in(txn, store, args, report.outcomes)
    except (GoldenError, ReportError, OSError, ValueError) as exc:
        return _fail(exc)
    _say_promoted(args, store, done)
    return 0


@dataclass
class _Promoted:
    """What one promote did, and the baselines it stacks on."""

    name: str  # the baseline the replaced answers are kept as
    baseline: GoldenStore
    earlier: list[str]  # the store's baselines before it, the oldest first
    promotion: Promotion


def _check_promotable(args: argparse.Namespace, report: Report) -> None:
    """Refuse a report of a run that did not finish, or with no answers of the named model."""
    gate = report.verdict.gate
    if gate is not None and gate.incomplete:
        raise GoldenError(
            f"{args.report} is from a run that did not finish ({gate.incomplete}): "
            "its answers are not a whole reference. Fix: run the suite to its "
            "end, then promote that run's report"
        )
    models = sorted({o.model for o in report.outcomes})
    if args.model not in models:
        raise GoldenError(
            f"{args.report} has no answers of {args.model!r}. Fix: name one of "
            f"its candidates: {', '.join(models) or 'none'}"
        )


def _promote_in(
    txn: Transaction, store: GoldenStore, args: argparse.Namespace, outcomes: list[Outcome]
) -> _Promoted:
    """Inside the store's transaction: the candidate's answers written over the reference's, the
    replaced ones kept as a new baseline marked with what it holds and what it stacks on."""
    from pytest_slam.golden.baselines import BaselineMark, baselines_of, free_name, mark_path
    from pytest_slam.golden.promote import baseline_name, promote
    from pytest_slam.golden.store import GoldenStore

    name = args.baseline or free_name(store, baseline_name(store.reference))
    baseline = GoldenStore(store.root, name)
    if baseline.dir == store.dir or baseline.dir.exists():
        raise GoldenError(f"{baseline.dir} exists already. Fix: pass --baseline a new name")
    earlier = [n for n, _ in baselines_of(store)]
    done = promote(store, baseline, outcomes, args.model, dry_run=args.dry_run)
    if done.promoted and not args.dry_run:
        mark = BaselineMark(name, store.reference, args.model, on_top_of=earlier)
        mark.promoted = done.written
        txn.stage(mark_path(baseline), mark.text())
    return _Promoted(name, baseline, earlier, done)


def _say_promoted(args: argparse.Namespace, store: GoldenStore, promoted: _Promoted) -> None:
    """Each entry promoted, the count, and the one command that undoes it (or the latest)."""
    done, earlier = promoted.promotion, promoted.earlier
    written = bool(done.promoted) and not args.dry_run
    verb = "would promote" if args.dry_run else "promote"
    for module, key in done.promoted:
        print(f"{verb} {module} {key}")
    skipped = "".join(f"; skipped {n}: {why}" for why, n in sorted(done.skipped.items()))
    kept = ", ".join(repr(n) for n in reversed(earlier))
    if earlier and written:
        print(
            f"earlier baselines of {store.reference!r} are kept too, the latest first: {kept} "
            "(undo this promote first, then them in that order)"
        )
    print(
        f"{len(done.promoted)} golden entries of {store.reference!r} "
        f"{'would take' if args.dry_run else 'now hold'} {args.model}'s answers, "
        f"{len(done.unchanged)} already did{skipped}"
    )
    undo = _undo_line(store, promoted, written, kept)
    if undo is not None:
        print(undo)


def _undo_line(store: GoldenStore, promoted: _Promoted, written: bool, kept: str) -> str | None:
    """The command that undoes this promote, or, when it wrote nothing, the latest earlier one."""
    if written:
        return (
            f"the replaced answers are kept as baseline {promoted.name!r} in "
            f"{promoted.baseline.dir}; undo with: "
            f"{undo_command(promoted.name, store.root, store.reference)}"
        )
    if promoted.earlier:
        latest = promoted.earlier[-1]
        return (
            f"earlier baselines of {store.reference!r} are kept, the latest first: {kept}; "
            f"undo the latest with: {undo_command(latest, store.root, store.reference)}"
        )
    return None


def run_reference(args: argparse.Namespace, settings: dict[str, Any]) -> str:
    """The reference the run was given, however it was (else the project's); ``--reference``,
    when given, must be the same."""
    ran = settings.get("reference")
    if args.reference and ran and golden_reference(args.reference) != golden_reference(str(ran)):
        raise GoldenError(
            f"{args.report} was run against {ran!r}, not {args.reference!r}. "
            "Fix: leave out --reference (the report names the run's)"
        )
    return str(ran or store_reference(args))


def undo_command(name: str, root: Path, reference: str) -> str:
    """The command that puts a promote's replaced answers back, ready to paste here."""
    return " ".join(
        [
            "slam golden unpromote",
            shlex.quote(name),
            "--root",
            shlex.quote(str(root)),
            "--reference",
            shlex.quote(reference),
        ]
    )


def cmd_unpromote(args: argparse.Namespace) -> int:
    """Write the baseline's answers back exactly as they were and remove the baseline, as one
    store-wide transaction; refuse (one line, nothing written) when that cannot be exact."""
    from pytest_slam.golden.promote import unpromote
    from pytest_slam.golden.store import GoldenStore

    try:
        store = GoldenStore(store_root(args), store_reference(args))
        if reference_slug(args.baseline) == store.dir.name:
            raise GoldenError(
                f"{args.baseline!r} is the reference itself. Fix: pass the "
                "baseline name `slam golden promote` printed"
            )
        baseline = GoldenStore(store.root, args.baseline)
        with store.transaction("unpromote"):
            say_recovered(store)
            restored = unpromote(store, baseline)
    except (GoldenError, OSError, ValueError) as exc:
        return _fail(exc)
    for module, key in restored:
        print(f"restore {module} {key}")
    print(
        f"restored {len(restored)} golden entries of {store.reference!r} from baseline "
        f"{args.baseline!r} (removed {baseline.dir})"
    )
    return 0


COMMANDS: tuple[tuple[str, Callable[..., argparse.ArgumentParser], Callable[..., int]], ...] = (
    ("promote", add_promote_arguments, cmd_promote),
    ("unpromote", add_unpromote_arguments, cmd_unpromote),
)
