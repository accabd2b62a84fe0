"""The baselines promotes keep: which exist for a reference, in which order, and what each promote
wrote, so that an undo is exact or refuses.

A promote writes, beside the baseline's golden files, its mark ``<baseline folder>/.slam-baseline``
(JSON, committed with the baseline; no ``.json`` suffix, so no store reads it as a golden file):
the baseline's name, the reference it was taken from, the candidate model, when, the baselines
that existed before it, and a digest of each entry's text as the promote wrote it. ``unpromote``
puts an entry back only while the live entry still has that digest: then the file gets back the
very bytes it had (the format is canonical); anything else (a later promote, a re-record, an
edit) is refused in one line naming the entry and, when there is one, the later baseline to undo
first. A baseline written before marks existed has none and is put back as it is.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from pytest_slam.golden.fileformat import entry_text
from pytest_slam.golden.store import GoldenStore, reference_slug
from pytest_slam.records import GoldenRecord, utc_moment

MARK_NAME = ".slam-baseline"
MARK_SCHEMA = "pytest-slam/golden-baseline/1"


def entry_digest(rec: GoldenRecord) -> str:
    """A digest of the entry's text as its golden file holds it."""
    return hashlib.blake2b(entry_text(rec).encode("utf-8"), digest_size=16).hexdigest()


@dataclass
class BaselineMark:
    """What a promote says about the baseline it kept."""

    name: str
    of: str  # the reference whose answers it holds
    model: str = ""  # the candidate promoted over them
    created: str = field(default_factory=lambda: f"{utc_moment():%Y-%m-%dT%H:%M:%S.%fZ}")
    on_top_of: list[str] = field(default_factory=list)  # baselines of `of` that existed before
    promoted: dict[str, dict[str, str]] = field(default_factory=dict)  # module -> key -> digest

    def text(self) -> str:
        doc = {"schema": MARK_SCHEMA, **self.__dict__}
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def mark_path(baseline: GoldenStore) -> Path:
    return baseline.dir / MARK_NAME


def read_mark(folder: Path) -> BaselineMark | None:
    """A baseline folder's mark; None when it has none (or one this version cannot read)."""
    try:
        doc = json.loads((folder / MARK_NAME).read_text(encoding="utf-8"))
        if doc.pop("schema") != MARK_SCHEMA:
            return None
        return BaselineMark(**doc)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _declared(folder: Path) -> str | None:
    for path in sorted(folder.rglob("*.json")):
        try:
            reference = json.loads(path.read_text(encoding="utf-8")).get("reference")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(reference, str):
            return reference
    return None


def baselines_of(store: GoldenStore) -> list[tuple[str, BaselineMark | None]]:
    """Every baseline of ``store``'s reference under its root, oldest first: ``(name, mark)``.

    Marked ones are found by their mark; an older, unmarked one by its default name
    (``<reference>@<time>``)."""
    if not store.root.is_dir():
        return []
    prefix = reference_slug(store.reference) + "-"  # the slug of "<reference>@<time>"
    found: list[tuple[str, str, BaselineMark | None]] = []
    for folder in sorted(p for p in store.root.iterdir() if p.is_dir() and p != store.dir):
        mark = read_mark(folder)
        if mark is not None and mark.of == store.reference:
            found.append((mark.created, mark.name, mark))
        elif mark is None and folder.name.startswith(prefix):
            name = _declared(folder)
            if name is not None and name.startswith(store.reference + "@"):
                found.append(("", name, None))
    return [(name, mark) for _, name, mark in sorted(found, key=lambda f: (f[0], f[1]))]


def later_marks(store: GoldenStore, name: str) -> list[BaselineMark]:
    """The marks of baselines promoted on top of ``name`` and still kept, oldest first."""
    return [mark for _, mark in baselines_of(store) if mark is not None and name in mark.on_top_of]


def later_than(store: GoldenStore, name: str) -> list[str]:
    """Baselines promoted on top of ``name`` and still kept: what to undo before it."""
    return [mark.name for mark in later_marks(store, name)]


def free_name(store: GoldenStore, name: str) -> str:
    """``name``, or ``name-2``, ``name-3``... when a baseline folder of that name exists already
    (two promotes in the same second)."""
    candidate, n = name, 1
    while GoldenStore(store.root, candidate).dir.exists():
        n += 1
        candidate = f"{name}-{n}"
    return candidate
