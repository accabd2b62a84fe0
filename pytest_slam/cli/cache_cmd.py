"""``slam cache clear``: forget what pytest-slam keeps between runs in its scratch folder (``.slam``).

Three things, each its own line of what was removed: the candidates' answers kept by
``--slm-cache`` (swap/cache.py, ``.slam/cache``), the reference's answers a refresh paid for and
did not record (golden/paid.py, ``.slam/paid``: the next refresh would reuse them) and the notes of
golden requests that missed (golden/misses.py, ``.slam/missed``: not fetched ahead again until
their golden entry changes). ``--answers``, ``--paid`` and ``--missed`` clear only those named.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NamedTuple

from pytest_slam.cli import exits
from pytest_slam.golden import misses, paid
from pytest_slam.swap import cache
from pytest_slam.util.files import remove_files, scratch_folder


class Kept(NamedTuple):
    """One kind of thing kept in ``.slam``: its option, folder, line, clear and what it counts."""

    option: str
    folder: str
    label: str
    pattern: str  # its files under the folder
    unit: str
    after: str  # what removing them means, said when any were


KEPT = (
    Kept("answers", cache.FOLDER, "answer cache", "*/*.json", "answer", ""),
    Kept(
        "paid",
        paid.FOLDER,
        "paid reference answers",
        "*.json",
        "answer",
        "a refresh paid for them and did not record them; the next refresh asks them again",
    ),
    Kept(
        "missed",
        misses.FOLDER,
        "missed golden requests",
        "*-*",  # each note's name: where, then its content
        "note",
        "their golden entries are fetched ahead again",
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    for kept in KEPT:
        parser.add_argument(
            f"--{kept.option}",
            action="store_true",
            help=f"Clear the {kept.label} (.slam/{kept.folder}); naming none clears all three",
        )
    return parser


def cmd_clear(args: argparse.Namespace) -> int:
    scratch = scratch_folder(Path(args.root))
    named = [k for k in KEPT if getattr(args, k.option, False)] or list(KEPT)
    for kept in named:
        folder = scratch / kept.folder
        removed = remove_files(folder, kept.pattern)
        counted = f"{removed} {kept.unit}{'' if removed == 1 else 's'}"
        after = f" ({kept.after})" if removed and kept.after else ""
        print(f"{kept.label}: {counted} removed from {folder}{after}")
    return exits.OK
