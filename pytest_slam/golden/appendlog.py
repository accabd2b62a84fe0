"""The golden store's append log: what a recording run keeps between two rewrites of a file.

A test run records every paid answer before its call returns (a kill must not lose it). Rewriting
the module's whole golden file for each answer made recording quadratic (51 s for 2,000 answers
against 7.6 s for 400); instead each answer is one fsynced line appended to this log, and the golden
file is rewritten (compacted: the log folded in, then emptied) when the log holds at least an eighth
of the file's bytes, at the end of the run, and when a later store opens a module whose log a
killed run left behind. Every answer is therefore on disk at once, the golden file lags it by at
most about one ninth of its answers, and the bytes written stay linear in the answers.

Logs live in the scratch folder beside the locks (``.slam/appendlog/<reference>/<module>.jsonl``),
never next to the goldens, so they are never committed. A line is ``{"key": ..., "entry": ...}``
with the entry exactly as the golden file stores it, secrets scrubbed; a line a kill tore (or any
line that does not parse as one) is skipped, and the complete lines before and after it are kept.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pytest_slam.golden.fileformat import GoldenFileError, entry_as_dict, entry_from_dict
from pytest_slam.golden.redact import scrub
from pytest_slam.records import GoldenRecord
from pytest_slam.util import textcodec
from pytest_slam.util.files import append_line

COMPACT_EVERY = 8  # the golden file is rewritten once the log holds 1/8 of its bytes


def append(path: Path, rec: GoldenRecord) -> int:
    """Put one record on disk (the caller holds the module's lock); returns the log's size."""
    line = textcodec.dumps(scrub({"key": rec.key, "entry": entry_as_dict(rec)}))
    return append_line(path, line)


def due(log_size: int, golden: Path) -> bool:
    """Whether the golden file should be rewritten now: the log is large against the file."""
    try:
        size = os.stat(golden).st_size
    except FileNotFoundError:
        size = 0
    return log_size * COMPACT_EVERY >= size


def pending(path: Path) -> bool:
    """Whether a log holds anything to fold (one ``stat``: asked when a module is opened)."""
    try:
        return os.stat(path).st_size > 0
    except FileNotFoundError:
        return False


def read(path: Path, where: Path) -> list[GoldenRecord]:
    """The log's records in the order they were appended; unreadable lines are skipped."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    records = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            item = json.loads(line.decode("utf-8"))
            records.append(entry_from_dict(where, item["key"], item["entry"]))
        except (ValueError, KeyError, TypeError, GoldenFileError):
            continue  # a line torn by a kill mid-append: what came before it is whole
    return records


def clear(path: Path) -> None:
    """Empty the log once the golden file holding its records is on disk."""
    path.unlink(missing_ok=True)
