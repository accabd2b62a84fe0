"""How big and how old the golden cache is, file by file (``slam golden stats``).

``age_days`` is the age of the oldest answer in the file: the number that says when the
reference's answers were last refreshed, which is what a reviewer of a stale cache wants to know.
A file that cannot be read gets a row with ``error`` set instead of stopping the listing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pytest_slam.golden.fileformat import GoldenError, read_golden
from pytest_slam.records import utc_moment

COLUMNS = ("file", "reference", "entries", "answers", "models", "oldest", "newest", "age_days")


@dataclass
class StatsRow:
    file: str  # relative to the store root, posix
    reference: str = ""
    entries: int = 0
    answers: int = 0
    models: list[str] = field(default_factory=list)  # model ids the reference API returned
    oldest: str | None = None  # recorded_at, ISO 8601 UTC
    newest: str | None = None
    age_days: float | None = None  # now minus oldest
    error: str | None = None


def _parse_time(value: str | None) -> datetime | None:
    try:
        stamp = datetime.fromisoformat(value) if value else None
    except ValueError:
        return None
    return stamp.replace(tzinfo=stamp.tzinfo or UTC) if stamp else None


def _row(root: Path, path: Path, now: datetime) -> StatsRow:
    row = StatsRow(file=path.relative_to(root).as_posix())
    try:
        golden = read_golden(path)
    except GoldenError as exc:
        row.error = str(exc)
        return row
    answers = [a for rec in golden.entries.values() for a in rec.answers]
    times = sorted(t for t in (_parse_time(a.recorded_at) for a in answers) if t)
    row.reference, row.entries, row.answers = golden.reference, len(golden.entries), len(answers)
    row.models = sorted({a.model for a in answers if a.model})
    if times:
        row.oldest, row.newest = times[0].isoformat(), times[-1].isoformat()
        row.age_days = round((now - times[0]).total_seconds() / 86400, 1)
    return row


def stats(root: Path, now: datetime | None = None) -> list[StatsRow]:
    """One row per golden file under ``root`` (every reference), sorted by file."""
    root, now = Path(root), now or utc_moment()
    files = sorted(root.rglob("*.json")) if root.is_dir() else []
    return [_row(root, path, now) for path in files]


def _cells(row: StatsRow) -> list[str]:
    if row.error:
        return [row.file, "unreadable (see below)"]
    age = "" if row.age_days is None else f"{row.age_days:.1f}"
    oldest, newest = ((t or "")[:10] for t in (row.oldest, row.newest))
    counts = [str(row.entries), str(row.answers)]
    return [row.file, row.reference, *counts, ", ".join(row.models), oldest, newest, age]


def format_stats(rows: list[StatsRow]) -> str:
    """A plain text table, a total line, then any unreadable file's error; dates as days."""
    if not rows:
        return "no golden files"
    header = ["file", "reference", "entries", "answers", "models", "oldest", "newest", "age (d)"]
    total = [str(sum(r.entries for r in rows)), str(sum(r.answers for r in rows))]
    table = [header, *(_cells(r) for r in rows), [f"total ({len(rows)} files)", "", *total]]
    widths = [max(len(line[i]) for line in table if i < len(line)) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=False)) for line in table]
    lines += [r.error for r in rows if r.error]
    return "\n".join(line.rstrip() for line in lines)
