"""The ``slam golden import | stats | prune | restore`` commands, for the ``slam`` CLI to mount.

``prune`` acts only on the report of the last run, and only when that run was complete; it lists each
entry it removes and keeps them in a trash file first, so ``restore`` can put them back.

Each ``cmd_*`` takes the ``argparse.Namespace`` its ``add_*_arguments`` defines, prints to stdout,
and returns the exit status (0 done, 1 a golden error, already printed to stderr). Mounting::

    golden = sub.add_parser("golden").add_subparsers(dest="golden_command", required=True)
    for name, add, cmd in COMMANDS:
        add(golden.add_parser(name)).set_defaults(func=cmd)
    ...
    sys.exit(args.func(args))
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_slam.golden.fileformat import GoldenError

if TYPE_CHECKING:
    from pytest_slam.golden.store import GoldenStore

DEFAULT_ROOT = Path("__slam__")  # settings.DEFAULT_GOLDEN_DIR; `slam` passes the resolved one
DEFAULT_REFERENCE = "openai:gpt-4"


def add_store_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--root`` and ``--reference``, shared by every golden command."""
    parser.add_argument(
        "--root", type=Path, default=DEFAULT_ROOT, help="Golden store folder (default %(default)s)"
    )
    parser.add_argument(
        "--reference", default=DEFAULT_REFERENCE, help="Reference model (default %(default)s)"
    )
    return parser


def add_import_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    from pytest_slam.golden.importers import FORMATS

    add_store_arguments(parser)
    parser.add_argument("path", type=Path, help="JSONL file of logged requests and answers")
    parser.add_argument(
        "--module", required=True, help="Test module the answers belong to, e.g. tests/test_x.py"
    )
    parser.add_argument("--format", choices=FORMATS, default="auto", help="Line format")
    return parser


def add_stats_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_store_arguments(parser)
    parser.add_argument("--json", action="store_true", help="Print the rows as JSON")
    return parser


def add_prune_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_store_arguments(parser)
    parser.add_argument(
        "--stale-report",
        type=Path,
        help="Report written by the last full run (default: beside "
        "the locks, <root>/../.slam/golden-stale.json)",
    )
    parser.add_argument("--dry-run", action="store_true", help="List the entries, remove none")
    return parser


def add_restore_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_store_arguments(parser)
    parser.add_argument(
        "trash",
        type=Path,
        nargs="?",
        help="Trash file a prune wrote (default: the latest, in <root>/../.slam/trash)",
    )
    return parser


def _fail(exc: Exception) -> int:
    print(f"slam golden: {exc}", file=sys.stderr)
    return 1


def cmd_import(args: argparse.Namespace) -> int:
    """Import a JSONL file into one module's golden file; prints the counts."""
    from pytest_slam.golden.importers import import_jsonl
    from pytest_slam.golden.store import GoldenStore

    try:
        store = GoldenStore(args.root, args.reference)
        result = import_jsonl(args.path, store, args.module, args.format)
    except (GoldenError, OSError, ValueError) as exc:
        return _fail(exc)
    print(
        f"imported {result.imported}, skipped {result.duplicates} duplicates, "
        f"{result.failed} failed calls -> {store.path_for(args.module)}"
    )
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print one row per golden file: entries, answers, returned models, dates, age."""
    from pytest_slam.golden.stats import format_stats, stats

    rows = stats(args.root)
    print(json.dumps([asdict(r) for r in rows], indent=2) if args.json else format_stats(rows))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    """Remove the entries the last complete run reported stale, keeping them in a trash file first;
    refuse (exit 1, one line) when the last run was partial."""
    from pytest_slam.golden.stale import read_stale_report, stale_report_path
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.golden.trash import Trash

    report = args.stale_report or stale_report_path(args.root)
    try:
        reference, entries = read_stale_report(report)
        store = GoldenStore(args.root, args.reference)
        if reference != store.reference:
            raise GoldenError(f"{report} lists entries of {reference!r}, not {store.reference!r}")
        if not entries:
            print("nothing to prune: the last complete run found no stale entries")
            return 0
        for module, key in entries:
            verb = "would remove" if args.dry_run else "remove"
            print(f"{verb} {module} {key}{_recorded_for(store, module, key)}")
        if not args.dry_run:
            trash = Trash(store.root, store.reference)
            removed = store.prune(entries, trash.add)
            report.unlink()
            undo = f"; undo with: slam golden restore {_shown(trash.path)}" if trash.path else ""
            print(f"pruned {removed} stale entries{undo}")
    except (GoldenError, OSError) as exc:
        return _fail(exc)
    return 0


def _recorded_for(store: GoldenStore, module: str, key: str) -> str:
    try:
        rec = store.lookup(module, key)
    except GoldenError:
        return ""
    if rec is None:
        return " (already gone)"
    return f" (recorded for {', '.join(rec.tests)})" if rec.tests else ""


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working folder when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def cmd_restore(args: argparse.Namespace) -> int:
    """Put back the entries a prune removed (the latest prune unless a trash file is named)."""
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.golden.trash import latest_trash, restore

    try:
        store = GoldenStore(args.root, args.reference)
        path = args.trash or latest_trash(args.root)
        restored, kept = restore(store, path)
        for module, key in restored:
            print(f"restore {module} {key}")
        for module, key in kept:
            print(f"keep {module} {key} (the file has this entry again; left as it is)")
        path.unlink()
    except (GoldenError, OSError) as exc:
        return _fail(exc)
    print(f"restored {len(restored)} entries from {_shown(path)}")
    return 0


COMMANDS: tuple[tuple[str, Callable[..., argparse.ArgumentParser], Callable[..., int]], ...] = (
    ("import", add_import_arguments, cmd_import),
    ("stats", add_stats_arguments, cmd_stats),
    ("prune", add_prune_arguments, cmd_prune),
    ("restore", add_restore_arguments, cmd_restore),
)

HELP = {  # each command's line in `slam golden --help` (plain text, pinned by test_cli_help.py)
    "import": "Import logged requests and answers (JSON Lines) as one test module's golden answers",
    "stats": "One row per golden file: entries, answers, returned models, dates, age",
    "prune": "Remove the entries the last complete run found stale, keeping them in a trash file",
    "restore": "Put back the entries a prune removed (the latest prune, or a trash file)",
}
