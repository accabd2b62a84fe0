"""``--slm-baseline=auto``: every run's JSON report saved in the project, the next run compared with it.

As pytest-benchmark's autosave: ``<rootdir>/.slam/runs/NNNN_<UTC time>.json``, numbered from 0001,
the last saved run being the baseline of the next. The number is taken with an exclusive create,
so two runs finishing together never write the same file, and the report itself is written with
the one atomic writer. ``.slam`` is pytest-slam's scratch folder (git-ignored); keep ``.slam/runs``
in a CI cache to compare across CI runs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pytest_slam.records import utc_moment
from pytest_slam.report.trend import History, saved_run, when
from pytest_slam.util.files import ignore_scratch_folder

AUTO = "auto"  # the --slm-baseline value
RUNS = Path(".slam") / "runs"
_NAME = re.compile(r"^(\d{4,})_\d{8}T\d{6}Z\.json$")


def runs_dir(rootdir: Path) -> Path:
    return Path(rootdir) / RUNS


def saved_runs(folder: Path) -> list[tuple[int, Path]]:
    """The saved runs, oldest first, by number; files of any other name are left alone."""
    found = []
    for path in folder.iterdir() if folder.is_dir() else ():
        match = _NAME.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def last_run(folder: Path) -> Path | None:
    """The last saved run's report, or None before the first (a number claimed by a run still
    writing, or one that failed to write, is an empty file: skipped)."""
    found = [path for _, path in saved_runs(folder) if path.stat().st_size]
    return found[-1] if found else None


def claim_next(folder: Path) -> Path:
    """The path of the next run's report, created empty so that no other run takes its number."""
    folder.mkdir(parents=True, exist_ok=True)
    ignore_scratch_folder(folder.parent)
    found = saved_runs(folder)
    number = found[-1][0] + 1 if found else 1
    stamp = utc_moment().strftime("%Y%m%dT%H%M%SZ")
    while True:
        path = folder / f"{number:04d}_{stamp}.json"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            number += 1
            continue
        return path


HISTORY_RUNS = 30  # the saved runs a report's trend chart reads, the last ones


def history(folder: Path, limit: int = HISTORY_RUNS) -> History:
    """The saved runs' metrics per candidate (``trend.METRICS``), oldest first, each labelled by
    its number (``0003``) and dated by its name's UTC stamp: the report's history charts. A run
    that cannot be read is left out."""
    import json

    found = []
    for number, path in saved_runs(folder)[-limit:]:
        try:
            rows = json.loads(path.read_text(encoding="utf-8")).get("models") or []
        except (OSError, ValueError, AttributeError):
            continue
        stamp = path.stem.split("_", 1)[1]
        run = saved_run(f"{number:04d}", when(stamp), rows if isinstance(rows, list) else [])
        if run is not None:
            found.append(run)
    return found
