"""The stale-entry report: how a pytest run tells ``slam golden prune`` what to remove.

Only a run knows which entries no test visited, so the plugin writes this report at the end of a
run (controller only) and ``slam golden prune`` applies it later, after a person has seen it.
It lives in ``<store root>/../.slam/golden-stale.json``, next to the locks, and is never committed.
"""

from __future__ import annotations

import json
from pathlib import Path

from pytest_slam.golden.fileformat import GoldenError, atomic_write, ignore_scratch_folder

STALE_SCHEMA = "pytest-slam/golden-stale/1"


def stale_report_path(root: Path) -> Path:
    """Where a run writes, and ``prune`` reads, the report for the store at ``root``."""
    return Path(root).parent / ".slam" / "golden-stale.json"


def write_stale_report(path: Path, reference: str, entries: list[tuple[str, str]]) -> None:
    """Write the report atomically (an empty list still overwrites an older report)."""
    doc = {"schema": STALE_SCHEMA, "reference": reference, "entries": sorted(map(list, entries))}
    ignore_scratch_folder(Path(path).parent)
    atomic_write(Path(path), json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def read_stale_report(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """The reference and the ``(module, key)`` entries a run found stale."""
    fix = "run the whole suite with pytest first; a full run writes it"
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GoldenError(f"{path}: no stale report. Fix: {fix}") from None
    except ValueError as exc:
        raise GoldenError(f"{path}: unreadable stale report ({exc}). Fix: {fix}") from None
    if not isinstance(doc, dict) or doc.get("schema") != STALE_SCHEMA:
        raise GoldenError(f"{path}: not a pytest-slam stale report. Fix: {fix}")
    return doc["reference"], [(str(m), str(k)) for m, k in doc["entries"]]
