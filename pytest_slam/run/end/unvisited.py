"""Golden entries no test of this run asked for: found (or pruned) by collect, reported by publish.

Judged only after a complete run (``Ended.partial_reason``): after Ctrl-C, a crash, -x, -k,
node ids, a collection error, an engine that did not start or a lost worker, an unvisited entry
may just belong to a test that never ran. A partial run says why in the stale report, so prune
refuses it. Modules with a failed or skipped test are not judged either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.run.end.summary import Summary
from pytest_slam.util.files import WriteFailed

if TYPE_CHECKING:
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.run.end.ended import Ended

STALE_SHOWN = 20  # stale entries named in the summary; the rest are counted


@dataclass(frozen=True)
class Merged:
    """The payloads merged: keys visited by module, modules run whole, failed tests' bases."""

    visited: dict[str, set[str]]
    covered: set[str]
    failed: set[str]

    @classmethod
    def of(cls, role: str, payloads: list[dict[str, Any]]) -> Merged:
        visited: dict[str, set[str]] = {}
        failed: set[str] = set()
        covered: set[str] | None = None
        for data in payloads:
            for module, keys in data["visited"].items():
                visited.setdefault(module, set()).update(keys)
            failed.update(data["failed_tests"])
            if role == "controller" and data is payloads[0]:
                continue  # the controller collects nothing; workers say what they covered
            mods = set(data["coverage"])
            covered = mods if covered is None else covered & mods
        return cls(visited, covered or set(), {t.split("[", 1)[0] for t in failed})


@dataclass(frozen=True)
class Stale:
    """What the stale report says (``entries``, or why the run was ``partial``) and the summary's
    lines; ``report`` False: finding them failed, the one line says so and no report is written."""

    store: GoldenStore
    entries: list[tuple[str, str]] = field(default_factory=list)  # left in the store
    partial: str | None = None
    lines: list[str] = field(default_factory=list)
    report: bool = True


def find_stale(ended: Ended, merged: Merged) -> Stale:
    """The entries no test asked for in a complete run, pruned with ``--slm-prune``."""
    store = _store(ended)
    why_not = ended.partial_reason()
    covered = merged.covered - {t.split("::", 1)[0] for t in merged.failed}
    summary, prune = ended.roles.summary, ended.choices.prune
    if why_not:
        line = f"stale golden entries not checked: {why_not}"
        if prune:
            line = f"--slm-prune removed nothing: this run was partial ({why_not})"
        return Stale(store, partial=why_not, lines=[line])
    try:
        stale = store.stale(merged.visited, covered, merged.failed)
        if stale and prune:
            return Stale(store, lines=_prune(summary, store, stale))
        return Stale(store, stale, lines=stale_lines(summary, store, stale))
    except (GoldenError, OSError) as exc:
        return Stale(store, lines=[f"stale golden entries not checked: {exc}"], report=False)


def _store(ended: Ended) -> GoldenStore:
    from pytest_slam.golden.store import GoldenStore

    if ended.roles.store is not None:
        return ended.roles.store
    settings = ended.setup.settings
    return GoldenStore(ended.roles.selection.rootpath / settings.golden_dir, settings.reference)


def _prune(summary: Summary, store: GoldenStore, stale: list[tuple[str, str]]) -> list[str]:
    """``--slm-prune``: remove the stale entries, each kept in a trash file first; say how to undo."""
    from pytest_slam.golden.trash import Trash

    listed = stale_lines(summary, store, stale, more="the trash file holds them all")[1:]
    trash = Trash(store.root, store.reference)
    removed = store.prune(stale, trash.add)
    undo = f"; undo with `slam golden restore {summary.shown(trash.path)}`" if trash.path else ""
    return [f"pruned {removed} stale golden entr{'y' if removed == 1 else 'ies'}{undo}:", *listed]


def stale_lines(
    summary: Summary,
    store: GoldenStore,
    stale: list[tuple[str, str]],
    more: str = "`slam golden prune --dry-run` lists them all",
) -> list[str]:
    """The summary's stale entries: the first ``STALE_SHOWN`` by name, with the tests they were
    recorded for (each read from its file), then how many more and where to see them."""
    if not stale:
        return []
    one = len(stale) == 1
    lines = [
        f"{len(stale)} stale golden entr{'y' if one else 'ies'} (no test asked for "
        f"{'it' if one else 'them'}); remove with --slm-prune or `slam golden prune`:"
    ]
    for module, key in stale[:STALE_SHOWN]:
        rec = store.lookup(module, key)
        was = f" (recorded for {', '.join(rec.tests)})" if rec is not None and rec.tests else ""
        lines.append(f"  {summary.shown(store.path_for(module))} {key}{was}")
    if len(stale) > STALE_SHOWN:
        lines.append(f"  ... and {len(stale) - STALE_SHOWN} more ({more})")
    return lines


def write_report(stale: Stale) -> list[str]:
    """This run's findings for `slam golden prune`, or why it was partial (prune then refuses);
    written where there are goldens or an old report (an old report is always replaced). The
    summary's lines, or the one line saying the report could not be written."""
    from pytest_slam.golden.stale import stale_report_path, write_stale_report

    if not stale.report:
        return stale.lines
    store = stale.store
    path = stale_report_path(store.root)
    try:
        if stale.entries or path.exists() or store.dir.is_dir():
            write_stale_report(path, store.reference, stale.entries, stale.partial)
    except WriteFailed:
        raise  # said by publish, where every writer's failure is: the run is incomplete
    except (GoldenError, OSError) as exc:
        return [f"stale golden entries not checked: {exc}"]
    return stale.lines
