"""A report's ``visits``: what a run saw of the suite, so shards can be merged and judged for staleness.

Only a run knows which golden keys its tests asked for, which tests it collected and ran, and
whether it ran to its end; ``slam report merge`` unions these over the shards and
``slam golden prune --from-report`` decides from them. A merged report says the suite is covered
only when every shard ran its own selection to the end and every collected test ran in some shard.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pytest_slam.records import Record


def module_of(nodeid: str) -> str:
    """The test module of a node id (``tests/test_x.py::test_a[m]`` -> ``tests/test_x.py``)."""
    return nodeid.split("::", 1)[0]


def test_base(nodeid: str) -> str:
    """A node id without its parameters: how a golden entry names the tests that recorded it."""
    return nodeid.split("[", 1)[0]


@dataclass
class Visits(Record):
    """One run's (or merged shards') evidence for stale golden entries.

    ``modules`` are the modules every collected opted-in test of ran here; ``collected`` holds
    what pytest collected before deselection (``-k``, ``--deselect``, pytest-split), ``selected``
    what it then ran; ``narrowed`` the node ids given on the command line, whose modules were
    collected only in part. ``complete`` says the run ran its own selection to its end
    (``partial`` says why not); ``exitstatus`` is pytest's, before the gate. ``run``: the run's
    identity (run/workers/runid.py), the same in every shard of one run, so a merge refuses another
    run's shard; ``unverified``: of a merged report, the shards it let in by ``--unsigned``,
    kept inside what it signs so a later merge of it still says so.
    """

    visited: dict[str, list[str]] = field(default_factory=dict)  # module -> golden keys
    modules: list[str] = field(default_factory=list)
    failed_tests: list[str] = field(default_factory=list)  # failed, errored or skipped node ids
    complete: bool = False
    partial: str | None = None
    collected: list[str] = field(default_factory=list)
    selected: list[str] = field(default_factory=list)
    narrowed: list[str] = field(default_factory=list)
    exitstatus: int = 0
    shards: list[str] = field(default_factory=list)  # a merged report: the shard files, in order
    run: str | None = None
    unverified: list[str] = field(default_factory=list)

    def missing(self) -> list[str]:
        """Collected tests that no shard ran: a shard is missing, or deselected them."""
        ran = set(self.selected)
        return [n for n in self.collected if n not in ran]

    def not_prunable(self) -> str | None:
        """Why these visits cannot call an entry stale (None: they can), in one phrase."""
        if not self.complete:
            return self.partial or "the run did not finish"
        missing = self.missing()
        if missing:
            return (
                f"{len(missing)} collected test(s) ran in no shard (first: {missing[0]}): a shard "
                "is missing or deselected them"
            )
        return None

    def covered_modules(self) -> set[str]:
        """Modules whose every collected test ran and none failed: only these are judged."""
        failed = {module_of(n) for n in self.failed_tests}
        return set(self.modules) - failed

    def failed_bases(self) -> set[str]:
        return {test_base(n) for n in self.failed_tests}


def merge_visits(shards: Iterable[tuple[str, Visits]]) -> Visits:
    """The visits of shards run as one suite: unions, and a module is covered when one shard ran
    it whole or the shards together ran every test a shard collected of it (pytest-split)."""
    named = list(shards)
    out = Visits(complete=all(v.complete for _, v in named), shards=[n for n, _ in named])
    out.run = named[0][1].run if named else None  # one run's shards (report/merge.py checks)
    visited: dict[str, set[str]] = {}
    for name, v in named:
        for module, keys in v.visited.items():
            visited.setdefault(module, set()).update(keys)
        if not v.complete and out.partial is None:
            out.partial = f"shard {name}: {v.partial or 'the run did not finish'}"
    out.visited = {m: sorted(keys) for m, keys in sorted(visited.items())}
    out.failed_tests = sorted({n for _, v in named for n in v.failed_tests})
    out.collected = sorted({n for _, v in named for n in v.collected})
    out.selected = sorted({n for _, v in named for n in v.selected})
    out.narrowed = sorted({n for _, v in named for n in v.narrowed})
    out.exitstatus = merged_exitstatus([v.exitstatus for _, v in named])
    out.modules = sorted(_covered(named, set(out.selected)))
    return out


def _covered(named: list[tuple[str, Visits]], ran: set[str]) -> set[str]:
    covered = {m for _, v in named for m in v.modules}
    for _, v in named:
        narrowed = {module_of(n) for n in v.narrowed}
        by_module: dict[str, list[str]] = {}
        for nodeid in v.collected:
            by_module.setdefault(module_of(nodeid), []).append(nodeid)
        for module, ids in by_module.items():
            if module not in narrowed and all(n in ran for n in ids):
                covered.add(module)
    return covered


# pytest.ExitCode values (this layer does not import pytest), most serious first
INTERRUPTED, INTERNAL_ERROR, USAGE_ERROR, TESTS_FAILED, NO_TESTS_COLLECTED = 2, 3, 4, 1, 5


def merged_exitstatus(statuses: list[int]) -> int:
    """pytest's exit status of the shards as one run: the most serious; no tests only if none had."""
    for status in (INTERRUPTED, INTERNAL_ERROR, USAGE_ERROR, TESTS_FAILED):
        if status in statuses:
            return status
    if statuses and all(s == NO_TESTS_COLLECTED for s in statuses):
        return NO_TESTS_COLLECTED
    return 0
