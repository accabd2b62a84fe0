"""``slam golden prune --from-report RUN.json``: stale entries judged from a (merged) JSON report.

A sharded suite has no single run that saw every test, so no stale report a run wrote covers it;
the merged report's ``visits`` do (report/visits.py). Prune acts on them only when every shard ran
its own selection to its end and the shards together ran every test any of them collected.
"""

from __future__ import annotations

from pathlib import Path

from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.store import GoldenStore, golden_reference
from pytest_slam.report.jsonreport import ReportError, load_report

FIX = (
    "run every shard to its end and merge all of them (slam report merge SHARD.json... -o RUN.json)"
)


def stale_from_report(path: Path, root: Path) -> tuple[str, list[tuple[str, str]]]:
    """The reference and the ``(module, key)`` entries no test of the report's run asked for, in
    the modules it ran whole; ``GoldenError`` (one line) when the report cannot judge them."""
    try:
        report = load_report(path)
    except ReportError as exc:
        raise GoldenError(str(exc)) from None
    visits = report.visits
    if visits is None:
        raise GoldenError(
            f"refusing to prune: {path} has no 'visits' (written by an older pytest-slam). "
            f"Fix: {FIX}"
        )
    why = visits.not_prunable()
    if why:
        raise GoldenError(f"refusing to prune: {path} is not a complete run ({why}). Fix: {FIX}")
    reference = str(report.verdict.run.settings.get("reference") or "")
    if not reference or reference.lower() == "none":
        raise GoldenError(f"{path}: the run had no reference model, so no golden entries to judge")
    store = GoldenStore(root, reference)
    visited = {module: set(keys) for module, keys in visits.visited.items()}
    stale = store.stale(visited, visits.covered_modules(), visits.failed_bases())
    return golden_reference(reference), stale
