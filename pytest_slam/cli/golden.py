"""The ``slam golden import | stats | prune | restore`` commands, for the ``slam`` CLI to mount.

``prune`` acts only on the report of the last run, and only when that run was complete; it lists each
entry it removes and keeps them in a trash file first, so ``restore`` can put them back. ``prune``
takes the reference from the stale report, and ``restore`` the store and the reference from the trash
file, so the undo command prune prints works as printed, even after a run given ``--slm-reference``
or ``--slm-golden-dir`` on its command line.

Each ``cmd_*`` takes the ``argparse.Namespace`` its ``add_*_arguments`` defines, prints to stdout,
and returns the exit status (0 done, 2 refused: one line on stderr saying what and the fix, nothing
written). Mounting (``project_root``, ``project_reference``: the project's own, used where
``--root``, ``--reference`` are not given)::

    golden = sub.add_parser("golden").add_subparsers(dest="golden_command", required=True)
    for name, add, cmd in COMMANDS:
        add(golden.add_parser(name)).set_defaults(func=cmd, project_root=..., project_reference=...)
    ...
    sys.exit(args.func(args))
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_slam.cli import exits
from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.store import TEST_MODULE_HINT, golden_reference, is_test_module

if TYPE_CHECKING:
    from pytest_slam.golden.store import GoldenStore

DEFAULT_ROOT = Path("__slam__")  # settings.DEFAULT_GOLDEN_DIR; `slam` passes the resolved one
DEFAULT_REFERENCE = "openai:gpt-4"
EXIT_REFUSED = exits.BAD_INPUT


def add_store_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--root`` and ``--reference``, shared by every golden command (None: not given)."""
    parser.add_argument(
        "--root", type=Path, help="Golden store folder (default: [tool.slam] golden_dir)"
    )
    parser.add_argument("--reference", help="Reference model (default: [tool.slam] reference)")
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
    parser.add_argument(
        "--recover",
        action="store_true",
        help="First finish or undo a store-wide change that was killed (a promote, merge, prune "
        "or restore left its journal), under the store lock; a replay refuses until then",
    )
    return parser


def add_prune_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_store_arguments(parser)
    parser.add_argument(
        "--stale-report",
        type=Path,
        help="Report written by the last full run (default: beside "
        "the locks, <root>/../.slam/golden-stale.json)",
    )
    parser.add_argument(
        "--from-report",
        type=Path,
        help="Judge stale entries from a JSON report instead, e.g. one merged from shards "
        "(slam report merge); refused unless every shard ran to its end",
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


def store_root(args: argparse.Namespace) -> Path:
    """``--root``, else the project's golden folder; ``GoldenError`` when that is a file."""
    root: Path = args.root or getattr(args, "project_root", None) or DEFAULT_ROOT
    if root.exists() and not root.is_dir():
        raise GoldenError(f"{root}: a file, not a golden store folder. Fix: pass --root the folder")
    return root


def store_reference(args: argparse.Namespace) -> str:
    """``--reference``, else the project's reference."""
    reference: str | None = args.reference or getattr(args, "project_reference", None)
    return reference or DEFAULT_REFERENCE


def say_recovered(store: GoldenStore) -> None:
    """The line recovering a killed store-wide change said (``golden.journal``), on stderr,
    before the command does anything else."""
    for line in store.recovered:
        print(line, file=sys.stderr)


def _fail(exc: Exception) -> int:
    print(f"slam golden: {exc}", file=sys.stderr)
    return EXIT_REFUSED


def cmd_import(args: argparse.Namespace) -> int:
    """Import a JSONL file into one module's golden file; prints the counts."""
    from pytest_slam.golden.importers import import_jsonl
    from pytest_slam.golden.store import GoldenStore

    try:
        if not is_test_module(args.module):
            raise GoldenError(
                f"--module {args.module!r} is not a test module of the project. "
                f"Fix: name {TEST_MODULE_HINT}"
            )
        store = GoldenStore(store_root(args), store_reference(args))
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
    from pytest_slam.golden.census import format_stats, stats

    try:
        if args.recover:
            _recover(store_root(args))
        else:
            _say_unfinished(store_root(args))
        rows = stats(store_root(args))
    except GoldenError as exc:
        return _fail(exc)
    print(json.dumps([asdict(r) for r in rows], indent=2) if args.json else format_stats(rows))
    return 0


def _say_unfinished(root: Path) -> None:
    """A killed store-wide change (its journal left) makes every replay refuse; the stats name it
    and the command that recovers it, on stderr (``--json`` stays parseable), before the rows."""
    from pytest_slam.golden.journal import RECOVER_COMMAND, unfinished
    from pytest_slam.util.files import scratch_folder

    left = unfinished(root, scratch_folder(root) / "locks")
    if left is not None:
        print(
            f"slam golden: {root}: {left} did not finish (killed?): some golden files hold its "
            f"answers and others do not, and every replay refuses until it is recovered. Fix: "
            f"run `{RECOVER_COMMAND}` (it keeps the change if it had written every file, else "
            "rolls it back)",
            file=sys.stderr,
        )


def _recover(root: Path) -> None:
    """Recover a killed store-wide change under the store lock, saying what it did (stderr)."""
    from pytest_slam.golden.journal import store_locked
    from pytest_slam.util.files import scratch_folder

    with store_locked(root, scratch_folder(root) / "locks") as recovered:
        print(recovered or f"slam golden: {root}: no unfinished change to recover", file=sys.stderr)


def cmd_prune(args: argparse.Namespace) -> int:
    """Remove the entries the last complete run reported stale, keeping them in a trash file first;
    refuse (one line) when the last run was partial or the report is not one a run wrote.

    The reference is the one the report names (the run's, however it was given); ``--reference``,
    when given, must be the same.
    """
    from pytest_slam.cli.prune_report import stale_from_report
    from pytest_slam.golden.stale import read_stale_report, stale_report_path
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.golden.trash import Trash

    try:
        report = args.from_report or args.stale_report or stale_report_path(store_root(args))
        reference, entries = (
            stale_from_report(report, store_root(args))
            if args.from_report
            else read_stale_report(report)
        )
        if args.reference and golden_reference(args.reference) != reference:
            raise GoldenError(
                f"{report} lists entries of {reference!r}, not {args.reference!r}. "
                "Fix: leave out --reference (the report names the run's)"
            )
        store = GoldenStore(store_root(args), reference)
        if not entries:
            print("nothing to prune: the last complete run found no stale entries")
            return 0
        with store.transaction("prune"):  # one lock from the first read to the last write
            say_recovered(store)
            _all_readable(store, entries)
            for module, key in entries:
                verb = "would remove" if args.dry_run else "remove"
                print(f"{verb} {module} {key}{_recorded_for(store, module, key)}")
            if not args.dry_run:
                trash = Trash(store.root, store.reference)
                removed = store.prune(entries, trash.add)
        if not args.dry_run:
            if not args.from_report:  # a run's stale list is spent; a JSON report is kept
                report.unlink()
            undo = f"; undo with: {undo_command(trash.path)}" if trash.path else ""
            print(f"pruned {removed} stale entries{undo}")
    except (GoldenError, OSError) as exc:
        return _fail(exc)
    return 0


def _all_readable(store: GoldenStore, entries: Iterable[tuple[str, object]]) -> None:
    """Read every golden file a command will change before it changes any: a broken one raises
    ``GoldenError`` (its one line) while every file is still as it was."""
    for module in sorted({module for module, _ in entries}):
        store.load(module)


def undo_command(trash: Path) -> str:
    """The command that puts a prune's entries back, ready to paste into a shell here.

    The trash file names its store and its reference, so its path is the one argument needed.
    """
    return f"slam golden restore {shlex.quote(_shown(trash))}"


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
    """Put back the entries a prune removed (the latest prune unless a trash file is named).

    The store and the reference are the ones the trash file names; ``--root`` is needed only for
    a trash file moved away from its ``.slam/trash`` folder, and ``--reference`` never.
    """
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.golden.trash import latest_trash, read_trash, restore

    try:
        path = args.trash or latest_trash(store_root(args))
        trash = read_trash(path)
        root = args.root or trash.store_root() or store_root(args)
        store = GoldenStore(root, args.reference or trash.reference)
        with store.transaction("restore"):  # one lock from the first read to the last write
            say_recovered(store)
            _all_readable(store, trash.items)
            restored, kept = restore(store, trash)
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
