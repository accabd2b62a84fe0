"""``slam report`` subcommands: render a JSON report as HTML, and diff two reports.

Each command takes an ``argparse.Namespace`` and returns the exit status; ``add_*_arguments``
declare the arguments so the ``slam`` CLI and its tests share one definition.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_slam.cli import exits
from pytest_slam.report.baseline import Tolerances, compare, format_diff
from pytest_slam.report.jsonreport import ReportError, load_report
from pytest_slam.report.section_checks import ConfigError

if TYPE_CHECKING:
    from pytest_slam.report.merge import Merged

EXIT_OK, EXIT_REGRESSED, EXIT_USAGE = exits.OK, exits.FINDING, exits.BAD_INPUT


def add_render_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report", help="JSON report written by --slm-report")
    parser.add_argument(
        "-o", "--output", default=None, help="HTML file to write (default: REPORT with .html)"
    )


def add_diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", help="Baseline JSON report")
    parser.add_argument("new", help="JSON report of the run to check")
    parser.add_argument(
        "--equivalence-drop",
        type=float,
        default=None,
        help="Mean equivalence may drop by this much (default 0.02)",
    )
    parser.add_argument(
        "--latency-increase-pct",
        type=float,
        default=None,
        help="E2E p95 may rise by this many percent (default 20)",
    )
    parser.add_argument(
        "--latency-increase-ms",
        type=float,
        default=None,
        help="E2E p95 must also rise by this many ms to count (default 50)",
    )
    parser.add_argument(
        "--cost-increase-pct",
        type=float,
        default=None,
        help="Cost per call may rise by this many percent (default 10)",
    )
    parser.add_argument(
        "--latency-min-samples",
        type=int,
        default=None,
        help="E2E p95 is compared only from this many calls on both sides (default 20)",
    )


def cmd_render(args: argparse.Namespace) -> int:
    """JSON report -> self-contained HTML report."""
    from pytest_slam.report.html import write_html

    try:
        report = load_report(args.report)
    except ReportError as exc:
        print(f"slam report render: {exc}", file=sys.stderr)
        return EXIT_USAGE
    output = Path(args.output) if getattr(args, "output", None) else Path(args.report)
    if output.suffix != ".html":
        output = output.with_suffix(".html")
    try:
        written = write_html(output, report.verdict, report.outcomes)
    except OSError as exc:  # the one write is atomic: nothing is left behind
        from pytest_slam.util.files import WriteFailed

        if isinstance(exc, WriteFailed) and exc.known:  # a full disk: its file, error and fix
            print(f"slam report render: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(
            f"slam report render: cannot write {output} ({exc.strerror or exc}); "
            "pass -o a file in a folder you can write",
            file=sys.stderr,
        )
        return EXIT_USAGE
    print(f"slam report render: wrote {written}")
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    """OLD NEW -> readable differences; exit 1 when NEW regressed against OLD."""
    try:
        tol = Tolerances.from_config(_tolerance_args(args))
        old, new = load_report(args.old), load_report(args.new)
    except (ReportError, ConfigError) as exc:
        print(f"slam report diff: {exc}", file=sys.stderr)
        return EXIT_USAGE
    diff = compare(new.verdict, old, tol)
    for line in format_diff(diff):
        print(line)
    return EXIT_REGRESSED if diff.regressed else EXIT_OK


def _tolerance_args(args: argparse.Namespace) -> dict[str, float]:
    names = (
        "equivalence_drop",
        "latency_increase_pct",
        "latency_increase_ms",
        "cost_increase_pct",
        "latency_min_samples",
    )
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def add_merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shards", nargs="+", help="JSON reports the shards' --slm-report wrote")
    parser.add_argument(
        "--key-file",
        default=None,
        help="File holding the shard key the shards were signed with (default: SLAM_SHARD_KEY, "
        "or the file SLAM_SHARD_KEY_FILE names)",
    )
    parser.add_argument(
        "--unsigned",
        action="store_true",
        help="Merge shards that carry no signature this merge can verify; the merged report "
        "names them (only for shards from jobs you trust)",
    )
    parser.add_argument("-o", "--output", required=True, help="Merged JSON report to write")
    parser.add_argument("--html", default=None, help="Also write the merged HTML report here")
    parser.add_argument("--markdown", default=None, help="Also write the verdict as Markdown here")
    parser.add_argument("--junit", default=None, help="Also write JUnit XML of every test here")


def cmd_merge(args: argparse.Namespace) -> int:
    """SHARD.json... -> the whole run's report and gate; exits with the whole run's status."""
    import shutil

    from pytest_slam.report.merge import MergeError, Trust, load_shards, merge
    from pytest_slam.report.seal import ShardKeyError, shard_key
    from pytest_slam.report.terminal import final_line, gate_lines, render_table
    from pytest_slam.run.end.exitstatus import gate_failed_line, gated_exitstatus
    from pytest_slam.run.inputs.options import check_writable

    outputs = [
        (args.output, "-o"),
        (args.html, "--html"),
        (args.markdown, "--markdown"),
        (args.junit, "--junit"),
    ]
    try:
        problem = next((p for p in (check_writable(path, f) for path, f in outputs) if p), None)
        if problem:
            raise MergeError(problem)
        trust = Trust(shard_key(args.key_file), unsigned=args.unsigned)
        merged = merge(load_shards(args.shards, trust), trust.unverified)
    except (MergeError, ShardKeyError) as exc:
        print(f"slam report merge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        written = _write_merged(args, merged)
    except OSError as exc:  # WriteFailed: the file, the error and the fix
        print(f"slam report merge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    width = shutil.get_terminal_size((100, 20)).columns
    for line in [*render_table(merged.verdict, width), *gate_lines(merged.verdict)]:
        print(line)
    status = gated_exitstatus(merged.gate, merged.exitstatus)
    if status != merged.exitstatus and merged.gate is not None:
        print(gate_failed_line(merged.gate))
    if trust.unverified:
        from pytest_slam.report.merge import unverified_note

        print(f"slam report merge: {unverified_note(trust.unverified)}")
    print(f"slam report merge: {len(args.shards)} shards -> {', '.join(map(str, written))}")
    if merged.verdict.gate is not None:
        print(final_line(merged.verdict, width))
    return status


def _write_merged(args: argparse.Namespace, merged: Merged) -> list[Path]:
    """Each file written atomically: a reader never sees half of one."""
    from pytest_slam.report.html import write_html
    from pytest_slam.report.jsonreport import write_json
    from pytest_slam.report.junit_xml import write_junit
    from pytest_slam.report.markdown import render_markdown
    from pytest_slam.util.files import atomic_write

    verdict, outcomes = merged.verdict, merged.outcomes
    written = [write_json(args.output, verdict, outcomes, merged.visits, lines=merged.lines)]
    if args.html:
        written.append(write_html(args.html, verdict, outcomes))
    if args.markdown:
        written.append(atomic_write(args.markdown, render_markdown(verdict) + "\n"))
    if args.junit:
        written.append(write_junit(args.junit, outcomes))
    return written
