"""``slam cache clear``: forget the candidates' answers kept by ``--slm-cache`` (swap/cache.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_slam.cli import exits
from pytest_slam.swap.cache import FOLDER, clear
from pytest_slam.util.files import scratch_folder


def cmd_clear(args: argparse.Namespace) -> int:
    folder = scratch_folder(Path(args.root)) / FOLDER
    removed = clear(folder)
    print(f"slam cache clear: {removed} kept answer(s) removed from {folder}")
    return exits.OK
