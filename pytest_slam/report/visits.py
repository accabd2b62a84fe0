"""A report's ``visits``: what a run saw of the suite, so shards can be merged and judged for staleness.

Only a run knows which golden keys its tests asked for, which tests it collected and ran, and
whether it ran to its end; ``slam report merge`` unions these over the shards and
``slam golden prune --from-report`` decides from them. A merged report says the suite is covered
only when every shard ran its own selection to the end and every collected test ran in some shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pytest_slam.records import JSON, Record


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

    ``as_dict`` leaves ``selected`` out when it equals ``collected`` (a run that deselected
    nothing would write each node id twice; report schema 3); ``from_dict`` reads it absent as
    ``collected``.
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

    def as_dict(self) -> dict[str, JSON]:
        data = super().as_dict()
        if data["selected"] == data["collected"]:
            del data["selected"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, JSON]) -> Visits:
        visits = super().from_dict(data)
        if "selected" not in data:
            visits.selected = list(visits.collected)
        return visits

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
    fold = VisitsFold()
    for name, visits in shards:
        fold.add(name, visits)
    return fold.merged()


class VisitsFold:
    """``merge_visits`` one shard at a time (``slam report merge`` reads one shard at a time): what
    it keeps of a shard is its names in the unions, not its visits."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._complete = True
        self._partial: str | None = None
        self._run: str | None = None
        self._visited: dict[str, set[str]] = {}
        self._failed: set[str] = set()
        self._selected: set[str] = set()
        self._narrowed: set[str] = set()
        self._statuses: list[int] = []
        self._modules: set[str] = set()
        # each suite a shard collected -> the shards that collected it (a bit each: shards collect
        # the same suite, as a rule, so a suite is held once, not once a shard); by shard, the
        # modules it collected and did not narrow: covered when every id it collected ran somewhere
        self._suites: list[tuple[list[str], int]] = []
        self._whole: list[set[str]] = []
        self._last: tuple[list[str] | None, set[str]] = (None, set())  # collected, its modules

    @property
    def first_run(self) -> str | None:
        """The run of the first shard added: every other shard's must be the same."""
        return self._run

    def add(self, name: str, visits: Visits) -> None:
        bit = 1 << len(self.names)
        if not self.names:
            self._run = visits.run  # one run's shards (report/merge.py checks)
        self.names.append(name)
        self._complete = self._complete and visits.complete
        if not visits.complete and self._partial is None:
            self._partial = f"shard {name}: {visits.partial or 'the run did not finish'}"
        for module, keys in visits.visited.items():
            self._visited.setdefault(module, set()).update(keys)
        self._failed.update(visits.failed_tests)
        self._selected.update(visits.selected)
        self._narrowed.update(visits.narrowed)
        self._statuses.append(visits.exitstatus)
        self._modules.update(visits.modules)
        suites = self._suites
        if suites and (suites[-1][0] is visits.collected or suites[-1][0] == visits.collected):
            suites[-1] = (suites[-1][0], suites[-1][1] | bit)
        else:
            suites.append((visits.collected, bit))
        narrowed = {module_of(n) for n in visits.narrowed}
        if visits.collected != self._last[0]:  # each shard collects the whole suite, as a rule
            self._last = (visits.collected, {module_of(n) for n in visits.collected})
        self._whole.append(self._last[1] - narrowed)

    def _collected(self) -> dict[str, int]:
        """Each collected id -> the shards that collected it (a bit each)."""
        found: dict[str, int] = {}
        for ids, bits in self._suites:
            for nodeid in ids:
                found[nodeid] = found.get(nodeid, 0) | bits
        return found

    def merged(self) -> Visits:
        out = Visits(complete=self._complete, shards=list(self.names), partial=self._partial)
        out.run = self._run
        out.visited = {m: sorted(keys) for m, keys in sorted(self._visited.items())}
        out.failed_tests = sorted(self._failed)
        collected = self._collected()
        out.collected = sorted(collected)
        out.selected = sorted(self._selected)
        out.narrowed = sorted(self._narrowed)
        out.exitstatus = merged_exitstatus(self._statuses)
        out.modules = sorted(self._covered(collected))
        return out

    def _covered(self, collected: dict[str, int]) -> set[str]:
        """Modules a shard ran whole, and modules of which every test a shard collected ran in
        some shard: a module is not covered by a shard that collected one of its tests none ran."""
        ran = self._selected
        short: set[tuple[int, str]] = set()  # (shard, module) with a collected test none ran
        for nodeid, shards in collected.items():
            if nodeid not in ran:
                module = module_of(nodeid)
                short.update((i, module) for i in range(len(self.names)) if shards >> i & 1)
        covered = set(self._modules)
        for i, modules in enumerate(self._whole):
            covered.update(m for m in modules if (i, m) not in short)
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
