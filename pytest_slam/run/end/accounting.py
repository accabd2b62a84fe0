"""Per-test accounting: each test's final Outcome, which tests failed or finished, what workers sent.

Fed by pytest's reports (which xdist carries home from the workers), read at the end of the run:
the outcomes become the report, the rest tells a complete run from a partial one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_slam.report.packed import KeptOutcomes
from pytest_slam.run.test.selection import Selection


@dataclass
class Accounting:
    """What the tests of this run came to, in the process that reports (a worker keeps no outcomes)."""

    role: str
    # one final Outcome per test, packed (report/packed.py): a kilobyte a test, not ten
    outcomes: KeptOutcomes = field(default_factory=KeptOutcomes)
    failed_tests: set[str] = field(default_factory=set)  # failed or skipped in any phase
    finished: set[str] = field(default_factory=set)  # tests whose teardown was reported
    worker_payloads: list[dict[str, Any]] = field(default_factory=list)  # finish._payload's
    workers_lost: int = 0  # xdist workers that sent nothing: their golden visits are unknown

    def __post_init__(self) -> None:
        given: Any = self.outcomes
        if not isinstance(given, KeptOutcomes):  # given as dicts (a test, a tool)
            self.outcomes = KeptOutcomes(given)

    def logreport(self, report: pytest.TestReport) -> None:
        from pytest_slam.run.test.outcomes import keep_final

        payload = getattr(report, "slam", None)
        if payload is not None and self.role != "worker":
            keep_final(self.outcomes, payload, report)  # one final outcome per test per model
        if report.failed or report.skipped:
            self.failed_tests.add(report.nodeid)
        if report.when == "teardown":
            self.finished.add(report.nodeid)

    def worker_deselected(self) -> int:
        """Tests the xdist workers deselected (they report it, the controller collects nothing)."""
        return sum(int(data.get("deselected", 0)) for data in self.worker_payloads)

    def partial_reason(
        self,
        selection: Selection,
        engine_errors: dict[str, str],
        status: int,
        stopped: str | bool,
        collected: int,
        own_selection: bool = False,
    ) -> str | None:
        """Why this run did not run every collected test to its end (None: it did).

        A partial run cannot tell an entry no test asks for from one whose test never ran, so it
        may call nothing stale. ``status``, ``stopped`` and ``collected``: pytest's session's.
        ``own_selection``: judge only whether the run's own selection (-k, node ids, a splitter's
        slice: a shard) ran to its end; a shard's report says so for ``slam report merge``.
        """
        deselected = 0 if own_selection else self.worker_deselected() + selection.deselected_count
        engines = sorted(engine_errors)
        node_ids = [] if own_selection else selection.node_ids
        lost, errors = self.workers_lost, selection.collect_errors
        missing = collected - len(self.finished)
        reasons = (
            (status == pytest.ExitCode.INTERRUPTED, "the run was interrupted"),
            (status == pytest.ExitCode.INTERNAL_ERROR, "pytest stopped on an internal error"),
            (status == pytest.ExitCode.USAGE_ERROR, "pytest stopped on a usage error"),
            (bool(stopped), f"the run stopped early ({stopped})"),
            (errors > 0, f"{errors} collection error(s)"),
            (lost > 0, f"{lost} xdist worker(s) lost, with the entries their tests asked for"),
            (bool(engines), f"the engine of {', '.join(engines)} did not start"),
            (deselected > 0, f"{deselected} test(s) deselected (-k, -m, --deselect, --lf)"),
            (bool(node_ids), f"narrowed to node ids ({', '.join(node_ids)})"),
            (missing > 0, f"{missing} of {collected} collected tests did not finish"),
        )
        return next((why for cond, why in reasons if cond), None)

    def cap_lines(self) -> list[str]:
        """The summary's word on answers the generation cap cut (chat.generation_cap), if any."""
        from pytest_slam.run.test.outcomes import CAP_OPTION
        from pytest_slam.swap.chat import STRUCTURED_FACTOR, STRUCTURED_MARGIN

        cut = self._tests_with(
            '"capped":true', lambda c: c.get("cut_by_cap") and c.get("error_kind") is None
        )
        ran = self._tests_with('"runaway"', lambda c: c.get("error_kind") == "runaway")
        lines = []
        if cut:
            lines.append(
                f"generation cap: the answers of {len(cut)} test(s) were cut at the output limit "
                f"pytest-slam set for calls without max_tokens ({_shown(cut)}); set max_tokens in "
                f"the request, or raise [tool.slam] cap_factor / cap_margin or {CAP_OPTION}"
            )
        if ran:
            lines.append(  # as short as the generation cap's line above (issue 52)
                f"structured cap: the candidate ran away in {len(ran)} test(s) ({_shown(ran)}): "
                f"a JSON or tool answer was not whole at the cap derived from the reference's "
                f"({STRUCTURED_FACTOR:g} x its tokens + {STRUCTURED_MARGIN}, or what the schema "
                "needs), a failed call; set max_tokens in the request, or raise [tool.slam] "
                f"cap_factor / cap_margin or {CAP_OPTION}"
            )
        return lines

    def _tests_with(self, needle: str, found: Callable[[dict[str, Any]], object]) -> list[str]:
        """The node ids of the tests with a call that ``found`` picks (among those whose packed
        text holds ``needle``: the others have none)."""
        kept = self.outcomes.having(needle)
        return [o["nodeid"] for o in kept if any(found(c) for c in o.get("calls", ()))]

    def calls_of(self, model: str) -> list[dict[str, Any]]:
        """Every call the tests made on ``model`` (the session budget's flat aggregate)."""
        return [c for o in self.outcomes if o["model"] == model for c in o["calls"]]


def _shown(nodeids: list[str]) -> str:
    """The first three node ids, and how many more."""
    more = f" and {len(nodeids) - 3} more" if len(nodeids) > 3 else ""
    return ", ".join(nodeids[:3]) + more
