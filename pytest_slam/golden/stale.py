"""The stale-entry report: how a pytest run tells ``slam golden prune`` what to remove.

Only a run knows which entries no test visited, so the plugin writes this report at the end of a
run (controller only) and ``slam golden prune`` applies it later, after a person has seen it.
It lives in ``<store root>/../.slam/golden-stale.json``, next to the locks, and is never committed.

Only a complete run may call an entry stale. A run marks the report "under way" when it starts and
replaces it at its end: with the entries a complete run found, or with why the run was partial.
So after an interrupt, a crash, ``-x``, ``-k`` or a kill (which never reaches the end), the report
names the reason and ``read_stale_report`` refuses it: prune cannot act on an older run's findings.
"""

from __future__ import annotations

import json
import reprlib
from pathlib import Path

from pytest_slam.golden.fileformat import GoldenError, read_scratch_text
from pytest_slam.golden.store import is_test_module, normalize_module
from pytest_slam.util import textcodec
from pytest_slam.util.files import atomic_write, ignore_scratch_folder, scratch_folder

STALE_SCHEMA = "pytest-slam/golden-stale/1"
UNDER_WAY = "a run started at {started} and has not finished (killed, or still running)"
FULL_RUN_FIX = (
    "run the whole suite with pytest to its end first (no -k, -x or node ids, no Ctrl-C); "
    "a complete run writes it"
)


def stale_report_path(root: Path) -> Path:
    """Where a run writes, and ``prune`` reads, the report for the store at ``root``."""
    return scratch_folder(root) / "golden-stale.json"


def write_stale_report(
    path: Path, reference: str, entries: list[tuple[str, str]], partial: str | None = None
) -> None:
    """Write the report atomically (an empty list still overwrites an older report).

    ``partial``: why the run was not complete; the report then lists nothing and prune refuses it.
    """
    doc: dict[str, object] = {"schema": STALE_SCHEMA, "reference": reference}
    doc["entries"] = [] if partial else sorted(map(list, entries))
    if partial:
        doc["partial"] = partial
    ignore_scratch_folder(Path(path).parent)
    atomic_write(Path(path), textcodec.dumps(doc, indent=2) + "\n")


def mark_run_started(root: Path, reference: str) -> None:
    """Say "a run is under way" in the report, where there are goldens or an old report.

    Written before anything else a run does, so a run killed at any later moment leaves a report
    that prune refuses. Nothing is written for a project with no golden answers yet.
    """
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.records import utc_now

    path = stale_report_path(root)
    store = GoldenStore(root, reference)
    if path.exists() or store.dir.is_dir():
        write_stale_report(path, store.reference, [], UNDER_WAY.format(started=utc_now()))


def read_stale_report(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """The reference and the ``(module, key)`` entries a complete run found stale.

    Raises ``GoldenError`` (one line: what and the fix) when there is no report, when the last
    run was partial, or when the file is not a report as a run writes it (hand-edited, damaged):
    prune then removes nothing.
    """
    path = Path(path)
    text = read_scratch_text(path, "stale report", FULL_RUN_FIX)

    def wrong(what: str) -> GoldenError:
        return GoldenError(f"{path}: not a pytest-slam stale report ({what}). Fix: {FULL_RUN_FIX}")

    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise wrong(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != STALE_SCHEMA:
        raise wrong(f"no 'schema': {STALE_SCHEMA!r} object")
    partial = doc.get("partial")
    if partial:
        raise GoldenError(
            f"refusing to prune: the last run was partial ({partial}), so it judged no "
            f"entry stale ({path}). Fix: {FULL_RUN_FIX}"
        )
    reference, entries = doc.get("reference"), doc.get("entries")
    if not isinstance(reference, str) or not reference.strip():
        raise wrong("'reference' must name the reference model")
    if not isinstance(entries, list):
        raise wrong("'entries' must be a list of [module, key] pairs")
    for number, entry in enumerate(entries, 1):
        pair = (
            isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str) for x in entry)
        )
        if not pair or not entry[1] or not is_test_module(entry[0]):
            raise wrong(
                f"entry {number} is not a [test module .py path, key] pair: {reprlib.repr(entry)}"
            )
    return reference, [(normalize_module(m), k) for m, k in entries]
