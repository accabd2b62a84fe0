"""What the swap's checks conclude about one test, over one run or all its ``--slm-repeat`` runs.

Its own module so that the checks (which build verdicts), the repeat wrapper (which merges them) and
the session (which stores them) import it and not each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

import pytest

from pytest_slam.records import GoldenRecord, Pair
from pytest_slam.swap.router import TestContext

CTX = pytest.StashKey[TestContext]()  # the opted-in test's calls, set by the session at setup
RESULT = pytest.StashKey["RepeatResult"]()
SHOWN_FAILURES = 5


class RepeatSummary(TypedDict):
    """A repeated test's pass rate as the report keeps it (plain data: it crosses xdist)."""

    runs: int
    passed: int
    rate: float


@dataclass
class TestVerdict:
    __test__ = False

    pairs: list[Pair] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    breaches: list[str] = field(default_factory=list)
    repeat: RepeatSummary | None = None  # under --slm-repeat
    records: dict[int, GoldenRecord] = field(default_factory=dict)  # call index -> its golden
    own_failure: bool = False  # the test's own code failed before the swap's checks ran


@dataclass
class RepeatResult:
    """Every run of one test: its verdict, and why each failed run failed."""

    runs: int = 0
    verdicts: list[TestVerdict] = field(default_factory=list)  # one per run
    offsets: list[int] = field(default_factory=list)  # index of each run's first call
    failures: list[tuple[int, str]] = field(default_factory=list)  # (run number, first line)
    pass_fraction: float = 1.0
    merged: TestVerdict | None = None  # the one verdict over all runs, built once

    @property
    def passed(self) -> int:
        return self.runs - len(self.failures)

    @property
    def rate(self) -> float:
        return self.passed / self.runs if self.runs else 0.0

    @property
    def reached(self) -> bool:
        return self.runs > 0 and self.rate >= self.pass_fraction

    def as_dict(self) -> RepeatSummary:
        return {"runs": self.runs, "passed": self.passed, "rate": self.rate}

    def message(self) -> str:
        head = (
            f"passed {self.passed} of {self.runs} runs (rate {self.rate:.2f}), "
            f"below pass_fraction {self.pass_fraction:.2f}"
        )
        shown = [f"run {n}: {why}" for n, why in self.failures[:SHOWN_FAILURES]]
        more = len(self.failures) - SHOWN_FAILURES
        if more > 0:
            shown.append(f"... and {more} more failed runs")
        return "\n  ".join([head, *shown])


def merged_verdict(item: pytest.Item) -> TestVerdict | None:
    """One verdict over all runs (None when the test was not repeated): every run's pairs, with
    call indexes into the test's whole call list; a problem only when the pass rate fell short.
    """
    result = item.stash.get(RESULT, None)
    if result is None or result.merged is not None:
        return None if result is None else result.merged
    merged = result.merged = TestVerdict(repeat=result.as_dict())
    for offset, verdict in zip(result.offsets, result.verdicts, strict=False):
        for pair in verdict.pairs:
            pair.call_index += offset
            merged.pairs.append(pair)
        merged.breaches.extend(verdict.breaches)
    if not result.reached:
        merged.problems.append(result.message())
    return merged
