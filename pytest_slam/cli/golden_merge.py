"""``slam golden merge`` and ``slam golden merge-driver``: goldens recorded apart, merged.

``merge INPUT... -o OUT [--base BASE]`` merges golden files into a file, or golden folders (each
shard's ``__slam__``) into a folder, file by file; OUT may be one of the inputs. Exit 0 merged,
1 when an entry was answered differently on two inputs (nothing written), 2 when an input cannot be
used (one line naming it, nothing written).

``merge-driver BASE OURS THEIRS [PATH]`` is the git merge driver (``%O %A %B %P``): it writes the
merge into OURS and exits 0, or, for entries answered differently on both branches, writes both
sides of each between conflict markers and exits 1 (git then reports a conflict); an unusable input
exits 2 and leaves OURS as it was. ``merge-driver --install`` writes the ``.gitattributes`` line
and the ``git config`` it needs. The merge rule is in ``golden.merge``.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_slam.cli import exits
from pytest_slam.cli.golden import DEFAULT_ROOT, _fail
from pytest_slam.golden.fileformat import GoldenError

if TYPE_CHECKING:
    from pytest_slam.golden.journal import Transaction

EXIT_CONFLICT = exits.FINDING
DRIVER = "slam-golden"
DRIVER_COMMAND = "slam golden merge-driver %O %A %B %P"
DRIVER_NAME = "pytest-slam golden files"

HELP = {
    "merge": "Merge golden files or folders recorded apart (CI shards, branches) into the file a "
    "serial recording writes",
    "merge-driver": "Git merge driver for golden files (BASE OURS THEIRS PATH); --install sets it up",
}


def add_merge_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument(
        "inputs",
        type=Path,
        nargs="+",
        metavar="INPUT",
        help="Golden files, or golden folders (each shard's __slam__), to merge",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        metavar="OUT",
        help="File (or folder, for folders) to write; its own content is replaced, so name it "
        "among the inputs too to keep its entries",
    )
    parser.add_argument(
        "--base",
        type=Path,
        metavar="BASE",
        help="The common ancestor the inputs started from (a file or folder): an entry one input "
        "re-recorded wins over another that kept the ancestor's answer",
    )
    return parser


def add_driver_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument(
        "files",
        type=Path,
        nargs="*",
        metavar="BASE OURS THEIRS [PATH]",
        help="The ancestor's, our and their version (git's %%O %%A %%B), and the file's path in the "
        "repository (%%P, for messages); the merge is written into OURS",
    )
    parser.add_argument(
        "--install",
        action="store_true",
        help="Set up the driver in this git repository: the .gitattributes line for the golden "
        "folder and git config merge.slam-golden.driver",
    )
    return parser


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge every input; write only when every file merged without a conflict. Into the
    project's golden store, it is a store-wide change (``golden.journal``): the store lock held
    from the first read to the last write, a killed change recovered first, the writes
    journalled, so a recording run's answers and a promote are never lost under it."""
    try:
        with _store_change(args.output, args, "merge") as txn:
            return _merge(args, txn)
    except GoldenError as exc:
        return _fail(exc)
    except OSError as exc:
        return _fail(GoldenError(_unwritable(args.output, exc)))


def _merge(args: argparse.Namespace, txn: Transaction | None) -> int:
    from pytest_slam.golden.threeway import merge_paths, write_merged

    planned = merge_paths(args.inputs, args.output, args.base)
    conflicts = [(out, c) for out, merged in planned for c in merged.conflicts]
    if conflicts:
        out, first = conflicts[0]
        more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
        print(
            f"slam golden: {out}: {first.describe()}{more}; nothing written. Fix: pass "
            "--base the goldens both started from if one side only kept the old answer, or "
            "re-record those tests on one side (pytest --slm-record=all) and merge again",
            file=sys.stderr,
        )
        return EXIT_CONFLICT
    for out, _ in planned:
        _check_writable(out)
    if txn is not None:
        planned = [(out.absolute(), merged) for out, merged in planned]
    write_merged(planned, txn)
    if txn is not None:
        txn.commit()  # here, so that a file that cannot be written is this command's one line
    entries = sum(len(merged.golden.entries) for _, merged in planned)
    print(
        f"merged {len(args.inputs)} inputs: {len(planned)} golden files, {entries} entries "
        f"-> {args.output}"
    )
    return 0


def _unwritable(out: Path, exc: OSError) -> str:
    where = exc.filename or out
    return (
        f"{where}: cannot write the merge there ({exc.strerror or exc}). "
        "Fix: pass -o a file or folder you can write"
    )


def _check_writable(out: Path) -> None:
    """Refuse, before anything is written, an output whose folder cannot be made or written."""
    import os

    folder = out.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        why = "not a folder" if not folder.is_dir() else "not writable"
        raise GoldenError(
            f"{out}: cannot write the merge there ({folder} is {why}); nothing written. "
            "Fix: pass -o a file or folder you can write"
        )


def _store_of(path: Path, args: argparse.Namespace) -> tuple[Path, Path] | None:
    """The project's golden store (its root and lock folder) when ``path`` is in it."""
    from pytest_slam.util.files import scratch_folder

    root = Path(getattr(args, "project_root", None) or DEFAULT_ROOT).absolute()
    try:
        Path(path).absolute().resolve().relative_to(root.resolve())
    except ValueError:
        return None
    return root, scratch_folder(root) / "locks"


def _waiting() -> None:
    print(
        "slam golden: waiting for the store lock (another pytest-slam command or run is writing "
        "the golden store)",
        file=sys.stderr,
        flush=True,
    )


@contextlib.contextmanager
def _store_change(path: Path, args: argparse.Namespace, what: str) -> Iterator[Transaction | None]:
    """A store-wide change of the project's store when ``path`` is in it, else nothing held."""
    store = _store_of(path, args)
    if store is None:
        yield None
        return
    from pytest_slam.golden.journal import transaction

    with transaction(*store, what, waiting=_waiting) as txn:
        if txn.recovered:
            print(txn.recovered, file=sys.stderr)
        yield txn


def cmd_merge_driver(args: argparse.Namespace) -> int:
    """Merge OURS and THEIRS over BASE into OURS, as git asks of a merge driver."""
    if args.install:
        return _install(args) if not args.files else _usage("--install takes no files")
    if len(args.files) not in (3, 4):
        return _usage("needs BASE OURS THEIRS [PATH] (git's %O %A %B %P), or --install")
    from pytest_slam.golden.threeway import merge_files, merged_text
    from pytest_slam.util.files import atomic_write

    base, ours, theirs, *shown = args.files
    name = str(shown[0]) if shown else str(ours)
    for side in (base, ours, theirs):  # git always passes three files: one missing is a misuse
        if not side.is_file():
            return _usage(
                f"{side}: no such file; nothing written. Fix: run it as git does "
                f"({DRIVER_COMMAND}), with the three files that exist"
            )
    try:
        with _store_lock(Path(shown[0]) if shown else None, args):
            merged = merge_files([ours, theirs], base)
            if not merged.golden.entries:
                return _usage(
                    f"{name}: the merge holds no entry, and a golden file is never empty; "
                    "OURS left as it was. Fix: delete the file (git rm) if that is what both "
                    "sides meant"
                )
            labels = {ours: "ours", theirs: "theirs"}  # git's temp file names say nothing
            atomic_write(ours, merged_text(merged, labels))
    except GoldenError as exc:
        print(f"slam golden merge-driver: {name}: {exc}", file=sys.stderr)
        return exits.BAD_INPUT
    if not merged.conflicts:
        return 0
    more = f" (and {len(merged.conflicts) - 1} more)" if len(merged.conflicts) > 1 else ""
    print(
        f"slam golden merge-driver: {name}: {merged.conflicts[0].describe(labels)}{more}; "
        "both kept between conflict markers. Fix: keep one side of each, or re-record those tests "
        "(pytest --slm-record=all) after keeping either",
        file=sys.stderr,
    )
    return EXIT_CONFLICT


@contextlib.contextmanager
def _store_lock(path: Path | None, args: argparse.Namespace) -> Iterator[None]:
    """The project's store lock while the driver reads and writes git's copies, when git merges a
    file of it (``path``, git's %P): a killed change is recovered first, and no writer of ours
    runs meanwhile. Git writes the merged result into the file itself after the driver returns."""
    store = _store_of(path, args) if path is not None else None
    if store is None:
        yield
        return
    from pytest_slam.golden.journal import store_locked

    with store_locked(*store, waiting=_waiting) as recovered:
        if recovered:
            print(recovered, file=sys.stderr)
        yield


def _usage(problem: str) -> int:
    print(f"slam golden merge-driver: {problem}", file=sys.stderr)
    return exits.BAD_INPUT


def _git(*argv: str) -> str:
    done = subprocess.run(["git", *argv], capture_output=True, text=True, check=False)
    if done.returncode:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise GoldenError(f"git {' '.join(argv)} failed: {why}. Fix: run it in a git repository")
    return done.stdout.strip()


def attributes_line(golden_root: Path) -> str:
    """The ``.gitattributes`` line that sends every golden file to the driver."""
    return f"{golden_root.as_posix().rstrip('/')}/**/*.json merge={DRIVER}"


def _install(args: argparse.Namespace) -> int:
    """Write the ``.gitattributes`` line (once) and the repository's ``git config``."""
    from pytest_slam.util.files import atomic_write

    try:
        top = Path(_git("rev-parse", "--show-toplevel"))
        root = Path(getattr(args, "project_root", None) or DEFAULT_ROOT).absolute()
        try:
            rel = root.resolve().relative_to(top.resolve())
        except ValueError:
            raise GoldenError(
                f"{root}: the golden folder is outside the git repository {top}. "
                "Fix: run this in the repository that holds it"
            ) from None
        line = attributes_line(rel)
        attributes = top / ".gitattributes"
        text = attributes.read_text(encoding="utf-8") if attributes.exists() else ""
        if line not in text.splitlines():
            ending = "" if not text or text.endswith("\n") else "\n"
            atomic_write(attributes, f"{text}{ending}{line}\n")  # whole or as it was
        _git("config", f"merge.{DRIVER}.name", DRIVER_NAME)
        _git("config", f"merge.{DRIVER}.driver", DRIVER_COMMAND)
    except (GoldenError, OSError) as exc:
        return _fail(exc)
    print(f"{attributes}: {line}")
    print(f"git config merge.{DRIVER}.driver '{DRIVER_COMMAND}'")
    return 0


COMMANDS: tuple[tuple[str, Callable[..., argparse.ArgumentParser], Callable[..., int]], ...] = (
    ("merge", add_merge_arguments, cmd_merge),
    ("merge-driver", add_driver_arguments, cmd_merge_driver),
)
