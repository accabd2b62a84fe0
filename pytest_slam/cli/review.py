"""``slam review``: serve the blind review page for the last run, or print its figures (``--stats``).

slam review [--report PATH] [--model NAME] [--test PART] [--order informative|judge]
            [--reviewer NAME] [--no-browser] [--port N]
slam review --stats [--report PATH]
slam review --audit [--report PATH]: the pairs the run set aside for audit (review/audits.py)
"""

from __future__ import annotations

import argparse
import getpass
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_slam.cli import exits

if TYPE_CHECKING:  # the review wing loads only for `slam review`
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.report.jsonreport import Report
    from pytest_slam.review.pairs import ReviewPair

ORDERS = ("report", "informative", "judge")
DEFAULT_REPORT = "slam-report.json"


def add_arguments(parser: argparse.ArgumentParser, report: str | None) -> argparse.ArgumentParser:
    parser.add_argument(
        "--report",
        default=report or DEFAULT_REPORT,
        help=f"JSON report of the run to review (default: [tool.slam] report, "
        f"else {DEFAULT_REPORT})",
    )
    parser.add_argument("--model", help="Review this candidate model only")
    parser.add_argument("--test", help="Review the tests whose node id contains this only")
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default="report",
        help="informative: pairs where the judge and a scorer disagree first; judge: the judge's "
        "least certain verdicts first (the labels that tighten its measured error most)",
    )
    parser.add_argument("--reviewer", help="Your name in the verdicts (default: git user.name)")
    parser.add_argument("--no-browser", action="store_true", help="Print the URL only")
    parser.add_argument("--port", type=int, default=0, help="Port on 127.0.0.1 (default: any)")
    parser.add_argument(
        "--stats",
        action="store_true",
        help="Print win/tie/loss per model and the agreement with scorers",
    )
    parser.add_argument(
        "--audit",
        action="store_true",
        help="Review the pairs the run set aside for audit ([tool.slam] audit_per_feature): "
        "the verdicts re-test the stated error of the bands and the judge on each feature",
    )
    parser.add_argument(
        "--export-labels",
        metavar="FILE.jsonl",
        help="Write the verdicts as labels for slam calibrate --labels",
    )
    return parser


def reviewer_name(given: str | None) -> str:
    """--reviewer, else git's user.name, else the login name."""
    if given and given.strip():
        return given.strip()
    try:
        done = subprocess.run(
            ["git", "config", "user.name"], capture_output=True, text=True, timeout=10, check=False
        )
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("USER") or getpass.getuser() or "anonymous"


def load(args: argparse.Namespace) -> tuple[GoldenStore, list[ReviewPair], int]:
    """The golden store and the pairs of the report; ``ReviewError`` when there are none (a report
    that cannot be read is the ``ReportError`` of ``load_report``: ``slam`` says it, exit 2)."""
    from pytest_slam.report.jsonreport import load_report

    return load_pairs(args, load_report(args.report))


def load_pairs(
    args: argparse.Namespace, report: Report
) -> tuple[GoldenStore, list[ReviewPair], int]:
    """``load`` of a report already read."""
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.review.pairs import collect
    from pytest_slam.review.verdicts import ReviewError

    reference = report.verdict.run.settings.get("reference") or args.reference
    store = GoldenStore(Path(args.root), reference)
    pairs, missing = collect(report.outcomes, store)
    if not pairs:
        why = f"{missing} answer(s) have no golden answer" if missing else "it holds no pair"
        raise ReviewError(
            f"nothing to review in {args.report} ({why}); record the reference and "
            f"write the report with `pytest --slm-record=new --slm-report={args.report}`"
        )
    return store, pairs, missing


def cmd_review(args: argparse.Namespace) -> int:
    from pytest_slam.report.jsonreport import load_report
    from pytest_slam.review.pairs import ordered, select
    from pytest_slam.review.verdicts import ReviewError

    report = load_report(args.report)
    store, pairs, _ = load_pairs(args, report)
    if args.stats or args.export_labels:
        return _stats(store, pairs, args.export_labels)
    if args.audit:
        pairs = audit_pairs(args.report, report, pairs)
    todo = ordered(select(pairs, args.model, args.test), args.order, store)
    if not todo:
        raise ReviewError(
            f"no pair matches --model {args.model} --test "
            f"{args.test}; drop the filter or check the names in the report"
        )
    return _serve(store, todo, reviewer_name(args.reviewer), args)


def audit_pairs(path: str, report: Report, pairs: list[ReviewPair]) -> list[ReviewPair]:
    """The pairs the run set aside for audit (``review/audits.set_aside``, from the report's own
    settings and start time); ``ReviewError``, one line and nothing written, when it set none."""
    from pytest_slam.review.audits import NONE_SET_ASIDE, NOTHING_TO_AUDIT, set_aside
    from pytest_slam.review.verdicts import ReviewError

    run = report.verdict.run
    per = run.settings.get("audit_per_feature") or 0
    if not isinstance(per, int) or per <= 0:
        raise ReviewError(NONE_SET_ASIDE.format(report=path, per=per))
    chosen = set_aside(report.outcomes, per, run.started)
    kept = [p for p in pairs if p.id in chosen]
    if not kept:
        raise ReviewError(NOTHING_TO_AUDIT.format(report=path))
    return kept


def _stats(store: GoldenStore, pairs: list[ReviewPair], export: str | None) -> int:
    from pytest_slam.review.agreement import labels, stats_lines
    from pytest_slam.review.verdicts import ReviewError, all_verdicts, dump_lines

    verdicts = [v for vs in all_verdicts(store).values() for v in vs]
    if not verdicts:
        raise ReviewError(f"no verdicts under {store.dir} yet; review with `slam review`")
    if export:
        from pytest_slam.util.files import atomic_write

        rows = labels(pairs, verdicts)
        atomic_write(export, dump_lines(rows))
        print(
            f"slam review: {len(rows)} label(s) written to {export}; "
            f"use them with `slam calibrate --labels {export}`"
        )
        return 0
    print("\n".join([*stats_lines(pairs, verdicts), *review_needs(store)]))
    return 0


def review_needs(store: GoldenStore) -> list[str]:
    """How many reviewed pairs of each kind a band or the judge needs to be certified at the
    default targets (``compare.needed``; ``slam calibrate`` states them at its own), against the
    verdicts stored so far: a "not worse" verdict is an acceptable label, "worse" is not."""
    from pytest_slam.compare.bandselect import Targets
    from pytest_slam.compare.calibrate import available_scorers
    from pytest_slam.compare.needed import needs_lines
    from pytest_slam.review.agreement import passed_by_human
    from pytest_slam.review.verdicts import all_verdicts

    verdicts = [v for vs in all_verdicts(store).values() for v in vs]
    good = sum(passed_by_human(v.verdict) for v in verdicts)
    lines = needs_lines(Targets(), len(available_scorers()), good, len(verdicts) - good)
    return [f"slam review: {lines[0]}", *lines[1:]]


def _serve(
    store: GoldenStore, todo: list[ReviewPair], reviewer: str, args: argparse.Namespace
) -> int:
    from pytest_slam.review.server import ReviewSession, launch_url, serve, url
    from pytest_slam.review.verdicts import ReviewError

    session = ReviewSession(store, todo, reviewer, audit=bool(getattr(args, "audit", False)))
    try:
        server = serve(session, args.port)
    except OSError as exc:
        why = exc.strerror or exc
        raise ReviewError(
            f"cannot listen on 127.0.0.1:{args.port} ({why}); leave out --port to take a free one"
        ) from None
    left = len(todo) - len(session.done)
    print(
        f"slam review: {left} of {len(todo)} pair(s) to review as {reviewer!r}; open "
        f"{url(server)}  (Ctrl-C to stop)",
        flush=True,
    )
    print("\n".join(review_needs(store)), flush=True)
    if not args.no_browser:  # a one-time launch URL: the token is in no process's argv
        _open_browser(launch_url(server))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    session.save_unsaved()  # once more: space may have come back since
    unsaved = len(session.unsaved)
    lost = (
        f"; {unsaved} not saved (the review file could not be written, said above): fix that "
        "and review them again with `slam review`"
        if unsaved
        else ""
    )
    print(
        f"slam review: {session.saved} verdict(s) saved beside the goldens in {store.dir}{lost}",
        file=sys.stderr,
    )
    return exits.BAD_INPUT if unsaved else exits.OK  # a verdict lost: the session is incomplete


def _open_browser(address: str) -> None:
    """Start the browser ($BROWSER, else the desktop's) beside the server: a command-line browser
    may wait for its page, which only the running server can answer."""
    import threading
    import webbrowser

    threading.Thread(
        target=webbrowser.open, args=(address,), name="slam-browser", daemon=True
    ).start()
