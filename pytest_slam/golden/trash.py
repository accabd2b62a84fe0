"""The prune trash: what a prune removed, kept so that ``slam golden restore`` can put it back.

Before a prune rewrites a golden file, the entries it removes from it are appended to
``<store root>/../.slam/trash/<UTC time>.jsonl`` (git-ignored with the rest of ``.slam``) and synced
to disk: one header line, then one line per entry with its module, its key and the entry as the
golden file held it. ``restore`` writes them back through the store (lock, re-read, atomic replace);
an entry whose key is in the file again (re-recorded since) is kept as it is now. Restoring the last
prune of files nobody changed since gives them back byte for byte (the file format is canonical).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pytest_slam.golden.fileformat import (
    GoldenError,
    entry_as_dict,
    entry_from_dict,
    ignore_scratch_folder,
)
from pytest_slam.golden.redact import scrub
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenRecord, utc_moment

TRASH_SCHEMA = "pytest-slam/golden-trash/1"


def trash_dir(root: Path) -> Path:
    """Where prunes of the store at ``root`` keep what they removed."""
    return Path(root).parent / ".slam" / "trash"


@dataclass
class Trash:
    """One prune's trash file, created on the first entry it keeps."""

    root: Path
    reference: str
    path: Path | None = None
    count: int = 0
    stamp: str = field(default_factory=lambda: f"{utc_moment():%Y%m%dT%H%M%S.%fZ}")

    def add(self, module: str, records: list[GoldenRecord]) -> None:
        """Append ``records`` (removed from ``module``) and sync, before the file loses them."""
        lines = [
            json.dumps(
                scrub({"module": module, "key": rec.key, "entry": entry_as_dict(rec)}),
                sort_keys=True,
                ensure_ascii=False,
            )
            + "\n"
            for rec in records
        ]
        with open(self._open(), "a", encoding="utf-8") as handle:
            handle.writelines(lines)
            handle.flush()
            os.fsync(handle.fileno())
        self.count += len(records)

    def _open(self) -> Path:
        if self.path is None:
            folder = trash_dir(self.root)
            folder.mkdir(parents=True, exist_ok=True)
            ignore_scratch_folder(folder.parent)
            path = folder / f"{self.stamp}.jsonl"
            header = {
                "schema": TRASH_SCHEMA,
                "reference": self.reference,
                "removed_at": self.stamp,
            }
            with open(path, "x", encoding="utf-8") as handle:  # "x": never mixes two prunes
                handle.write(json.dumps(header) + "\n")
            self.path = path
        return self.path


def latest_trash(root: Path) -> Path:
    """The most recent prune's trash file; ``GoldenError`` when there is none."""
    folder = trash_dir(root)
    found = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not found:
        raise GoldenError(f"{folder}: no pruned entries to restore (no trash file)")
    return found[-1]


def read_trash(path: Path) -> tuple[str, list[tuple[str, GoldenRecord]]]:
    """The reference and the ``(module, record)`` pairs a prune removed."""
    fix = "restore a file written by `slam golden prune` (under .slam/trash)"
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0]) if lines else None
        if not isinstance(header, dict) or header.get("schema") != TRASH_SCHEMA:
            raise ValueError("no pytest-slam trash header")
        items = []
        for number, line in enumerate(lines[1:], 2):
            data = json.loads(line)
            where = Path(f"{path}:{number}")
            items.append((str(data["module"]), entry_from_dict(where, data["key"], data["entry"])))
    except FileNotFoundError:
        raise GoldenError(f"{path}: no such trash file. Fix: {fix}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise GoldenError(f"{path}: unreadable trash file ({exc}). Fix: {fix}") from None
    return str(header["reference"]), items


def restore(store: GoldenStore, path: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Put a trash file's entries back into ``store``: ``(restored, kept)`` as ``(module, key)``.

    ``kept``: entries whose key the file has again, left as they are now.
    """
    reference, items = read_trash(path)
    if reference != store.reference:
        raise GoldenError(f"{path} holds entries of {reference!r}, not {store.reference!r}")
    by_module: dict[str, list[GoldenRecord]] = {}
    for module, rec in items:
        by_module.setdefault(module, []).append(rec)
    restored: list[tuple[str, str]] = []
    kept: list[tuple[str, str]] = []
    for module, records in sorted(by_module.items()):
        back = set(store.put_back(module, records))
        for rec in records:
            (restored if rec.key in back else kept).append((module, rec.key))
    return restored, kept
