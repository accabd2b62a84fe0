"""The prune trash: what a prune removed, kept so that ``slam golden restore`` can put it back.

Before a prune rewrites a golden file, the entries it removes from it are appended to
``<store root>/../.slam/trash/<UTC time>.jsonl`` (git-ignored with the rest of ``.slam``) and synced
to disk: one header line (the reference, and the store folder's name), then one line per entry with
its module, its key and the entry as the golden file held it. So a trash file says which store it
belongs to, and ``slam golden restore TRASH`` needs no other argument, whatever the run was given.
``restore`` writes them back through the store (lock, re-read, atomic replace); an entry whose key
is in the file again (re-recorded since) is kept as it is now. Restoring the last
prune of files nobody changed since gives them back byte for byte (the file format is canonical).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_slam.golden.fileformat import (
    GoldenError,
    entry_as_dict,
    entry_from_dict,
    read_scratch_text,
)
from pytest_slam.golden.redact import scrub
from pytest_slam.golden.store import GoldenStore, is_test_module, normalize_module
from pytest_slam.records import GoldenRecord, utc_moment
from pytest_slam.util import textcodec
from pytest_slam.util.files import (
    WriteFailed,
    append_text,
    ignore_scratch_folder,
    scratch_folder,
    writing,
)

TRASH_SCHEMA = "pytest-slam/golden-trash/1"


def trash_dir(root: Path) -> Path:
    """Where prunes of the store at ``root`` keep what they removed."""
    return scratch_folder(root) / "trash"


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
            textcodec.dumps(
                scrub({"module": module, "key": rec.key, "entry": entry_as_dict(rec)}),
                sort_keys=True,
            )
            + "\n"
            for rec in records
        ]
        append_text(self._open(), "".join(lines))  # whole or not at all: WriteFailed
        self.count += len(records)

    def _open(self) -> Path:
        if self.path is None:
            folder = trash_dir(self.root)
            with writing(folder):
                folder.mkdir(parents=True, exist_ok=True)
            ignore_scratch_folder(folder.parent)
            path = folder / f"{self.stamp}.jsonl"
            header = {
                "schema": TRASH_SCHEMA,
                "reference": self.reference,
                "root": Path(self.root).name,
                "removed_at": self.stamp,
            }
            try:
                with writing(path), open(path, "x", encoding="utf-8") as handle:  # "x": never
                    handle.write(json.dumps(header) + "\n")  # two prunes in one file
            except WriteFailed:
                path.unlink(missing_ok=True)  # no torn trash file for a restore to pick
                raise
            self.path = path
        return self.path


def latest_trash(root: Path) -> Path:
    """The most recent prune's trash file; ``GoldenError`` when there is none."""
    folder = trash_dir(root)
    found = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not found:
        raise GoldenError(
            f"{folder}: no pruned entries to restore (no trash file). Fix: pass the trash file "
            "the prune printed, or the --root of the store it pruned"
        )
    return found[-1]


@dataclass
class TrashFile:
    """What one prune removed: from which store, and each ``(module, record)``."""

    path: Path
    reference: str
    root_name: str | None  # the store folder's name; None in a trash file of an older prune
    items: list[tuple[str, GoldenRecord]]

    def store_root(self) -> Path | None:
        """The store the entries came from, when the file is still where its prune wrote it."""
        folder = self.path.parent
        if not self.root_name or (folder.name, folder.parent.name) != ("trash", ".slam"):
            return None
        return folder.parent.parent / self.root_name


def read_trash(path: Path) -> TrashFile:
    """The trash file a prune wrote; ``GoldenError`` (one line, with the fix) for anything else."""
    path = Path(path)
    fix = "restore a file written by `slam golden prune` (under .slam/trash), as it wrote it"
    lines = read_scratch_text(path, "trash file", fix).splitlines()

    def wrong(what: str) -> GoldenError:
        return GoldenError(f"{path}: unreadable trash file ({what}). Fix: {fix}")

    try:
        header = json.loads(lines[0]) if lines else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("schema") != TRASH_SCHEMA:
        raise wrong("no pytest-slam trash header")
    reference, root_name = header.get("reference"), header.get("root")
    if not isinstance(reference, str) or not reference.strip():
        raise wrong("the header names no reference")
    if root_name is not None and (
        not isinstance(root_name, str) or Path(root_name).name != root_name
    ):
        raise wrong(f"the header's 'root' {root_name!r} is not a folder name")
    items = []
    for number, line in enumerate(lines[1:], 2):
        if line.strip():
            items.append(_item(path, number, line, wrong))
    return TrashFile(path, reference, root_name or None, items)


def _item(
    path: Path, number: int, line: str, wrong: Callable[[str], GoldenError]
) -> tuple[str, GoldenRecord]:
    """One removed entry: ``(module, record)``."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise wrong(f"line {number} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("key"), str) or not data["key"]:
        raise wrong(f"line {number} is not an object with 'module', 'key' and 'entry'")
    if not is_test_module(data.get("module")):
        raise wrong(f"line {number}: 'module' is not a test .py path: {data.get('module')!r}")
    try:
        rec = entry_from_dict(Path(f"{path}:{number}"), data["key"], data.get("entry"))
    except (GoldenError, TypeError, ValueError):
        raise wrong(f"line {number}: 'entry' is not a golden entry") from None
    return normalize_module(data["module"]), rec


def restore(
    store: GoldenStore, trash: TrashFile
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Put a trash file's entries back into ``store``: ``(restored, kept)`` as ``(module, key)``.

    ``kept``: entries whose key the file has again, left as they are now.
    """
    if trash.reference != store.reference:
        raise GoldenError(
            f"{trash.path} holds entries of {trash.reference!r}, not {store.reference!r}. "
            f"Fix: leave out --reference (the file names its own)"
        )
    by_module: dict[str, list[GoldenRecord]] = {}
    for module, rec in trash.items:
        by_module.setdefault(module, []).append(rec)
    restored: list[tuple[str, str]] = []
    kept: list[tuple[str, str]] = []
    for module, records in sorted(by_module.items()):
        back = set(store.put_back(module, records))
        for rec in records:
            (restored if rec.key in back else kept).append((module, rec.key))
    return restored, kept
