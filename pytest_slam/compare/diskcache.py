"""A small on-disk cache of JSON values by key, one file per key, written atomically.

For what calibration and its evaluation compute again and again on the same labels: sentence
embeddings of long answers (keyed by model and the text's sha256) and judge verdicts (keyed as
the run keys them, ``judge.judge_key``). A file is written by ``files.atomic_write`` (no fsync: a
lost entry is recomputed), so a reader (another ``slam calibrate``, a ``pytest -n`` worker) sees
a whole value or none; an unreadable file is a miss, computed again. The folder is the project's
scratch folder (``.slam`` beside the golden files, git-ignored).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pytest_slam.util.files import atomic_write, ignore_scratch_folder


def text_key(*parts: str) -> str:
    """A file-safe key: sha256 of the parts (model name, text, ...), hex."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()  # ASCII: a lone surrogate too


class DiskCache:
    """``get(key)`` / ``put(key, value)`` of JSON values under ``folder`` (created on first put).

    Keys are spread over 256 sub-folders by their last two characters, so a cache of many
    thousand embeddings stays a quick directory to list."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        safe = key if key.replace("-", "").isalnum() else text_key(key)
        return self.folder / safe[-2:] / f"{safe}.json"

    def get(self, key: str) -> Any:
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, value: Any) -> None:
        """Keep ``value`` under ``key``. A file that cannot be written (a full disk, a read-only
        ``.slam``, its sub-folder not made included) raises ``WriteFailed``, its one line; the
        entries already kept stay as they were."""
        path = self._path(key)  # atomic_write makes its folder, inside its own WriteFailed
        for parent in (self.folder, *self.folder.parents):  # .slam stays git-ignored
            if parent.name == ".slam":
                ignore_scratch_folder(parent)
                break
        atomic_write(path, json.dumps(value), durable=False)  # a lost entry is recomputed
