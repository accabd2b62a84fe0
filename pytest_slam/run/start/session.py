"""SlamSession: one pytest run's state, and the entry points the hooks hand off to.

Process roles: ``serial`` (no xdist) does everything; under xdist the ``controller`` owns the
engines, merges what the workers publish and writes the reports, and each ``worker`` runs tests
through its own loopback swap proxy.

run/start/startup.py builds the session at configure time with every part: the engines
(run/start/engine_start.py), the swap (run/wired/wiring.py: proxy, router, reference service, each handed its
collaborators as it is built), the tests' entry (run/test/entry.py), and the role objects unit-tested
without pytest runs: ``Selection`` (run/test/selection.py: what was collected and selected),
``Accounting`` (run/end/accounting.py: each test's outcome, which finished, what workers sent),
``Summary`` (run/end/summary.py: the section's lines); at the end run/end/handover.py hands what the
session kept to ``finish`` (run/end/finish.py: collect -> judge -> publish).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_slam.records import ModelSpec
from pytest_slam.run.end.accounting import Accounting
from pytest_slam.run.end.finish import finish
from pytest_slam.run.end.publish import drop_older_reports
from pytest_slam.run.end.summary import Summary
from pytest_slam.run.start.engine_start import Engines, EngineStart, WorkerInput, worker_input
from pytest_slam.run.test.entry import VERDICT, TestEntry
from pytest_slam.run.test.selection import Selection
from pytest_slam.settings import Settings

if TYPE_CHECKING:  # imported when the swap arms: a run that opts nothing in never loads them
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.metrics.metering import EnergyMeter
    from pytest_slam.run.inputs.tables import Tables
    from pytest_slam.run.score.checks import Checker
    from pytest_slam.run.start.progress import Progress
    from pytest_slam.run.wired.wiring import Swap
    from pytest_slam.swap.ahead import Ahead
    from pytest_slam.swap.cache import AnswerCache
    from pytest_slam.swap.proxy import SwapProxy
    from pytest_slam.swap.router import SwapRouter

__all__ = ["VERDICT", "SlamSession"]


@dataclass(eq=False)
class SlamSession:
    config: pytest.Config
    settings: Settings
    specs: dict[str, ModelSpec]
    selection: Selection
    accounting: Accounting
    summary: Summary
    engines: Engines
    entry: TestEntry
    role: str = "serial"
    reference_spec: ModelSpec | None = None
    judge_spec: ModelSpec | None = None
    swap: Swap | None = None  # every process that runs tests, in an armed run
    checker: Checker | None = None
    energy: EnergyMeter | None = None
    progress: Progress | None = None  # engine lines and heartbeats (run/start/progress.py)
    parsed_tables: Tables | None = None  # parsed at configure where the checks needed them
    started: str = ""
    gpu_line: str = ""

    @property
    def armed(self) -> bool:
        return self.selection.armed

    # -- the parts, as the end of the run reads them -----------------------------------------------

    @property
    def router(self) -> SwapRouter | None:
        return self.swap.router if self.swap is not None else None

    @property
    def proxy(self) -> SwapProxy | None:
        return self.swap.proxy if self.swap is not None else None

    @property
    def store(self) -> GoldenStore | None:
        return self.swap.store if self.swap is not None else None

    @property
    def ahead(self) -> Ahead | None:
        """Answers fetched ahead of the tests (swap/ahead.py)."""
        return self.swap.ahead if self.swap is not None else None

    @property
    def cache(self) -> AnswerCache | None:
        """Candidates' answers kept between runs, opt-in (swap/cache.py)."""
        return self.swap.cache if self.swap is not None else None

    @property
    def redirected(self) -> set[str]:
        """Hosts whose calls redirect.py swapped."""
        return self.swap.redirected if self.swap is not None else set()

    @property
    def engine_errors(self) -> dict[str, str]:
        return self.engines.errors

    @property
    def engine_starts(self) -> list[EngineStart]:
        return self.engines.starts

    @functools.cached_property
    def tables(self) -> Tables:
        """``[tool.slam]``'s tables, parsed once for the checks and the end of the run."""
        if self.parsed_tables is not None:
            return self.parsed_tables
        from pytest_slam.run.inputs.tables import Tables
        from pytest_slam.util.files import scratch_folder

        golden_root = Path(self.config.rootpath) / self.settings.golden_dir
        return Tables.of(self.settings, scratch=scratch_folder(golden_root))

    def worker_input(self) -> WorkerInput:
        return worker_input(
            [*self.specs.values(), self.reference_spec, self.judge_spec], self.engine_errors
        )

    def close(self) -> None:
        if self.ahead is not None:  # an interrupt: nothing more is sent, nothing waits on it
            self.ahead.close()
        if self.swap is not None:
            self.swap.stop()
        self.engines.stop()
        if self.progress is not None:
            self.progress.close()
        if self.energy is not None:
            self.energy.close()

    # -- lifecycle hooks --------------------------------------------------------------------------

    def session_start(self) -> None:
        """xdist's controller starts the engines before its workers exist, to hand them the URLs.

        First, the stale report says "a run is under way": a run killed from here on (even before
        ``pytest_sessionfinish``) leaves nothing that ``slam golden prune`` would act on.
        """
        if not self.armed or self.config.option.collectonly:
            return
        if self.role != "worker" and self.settings.has_reference:
            from pytest_slam.golden.stale import mark_run_started
            from pytest_slam.util.files import WriteFailed

            root = Path(self.config.rootpath) / self.settings.golden_dir
            try:
                mark_run_started(root, self.settings.reference)
            except WriteFailed as exc:  # a read-only scratch folder: no lock, no answer kept
                raise pytest.UsageError(f"pytest-slam: {exc}") from None
        if self.role == "controller":
            try:
                self.engines.start()
            except KeyboardInterrupt:  # pytest skips sessionfinish (and its summary) from here
                terminal = self.config.pluginmanager.get_plugin("terminalreporter")
                for line in drop_older_reports(self.settings):
                    if terminal is not None:
                        terminal.write_line(f"pytest-slam: {line}")
                raise

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # xdist's controller hears of its workers' failed collections too
            self.selection.collect_failed()

    def is_swapped(self, item: pytest.Item) -> bool:
        return self.selection.is_swapped(item)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from pytest_slam.run.test.outcomes import one_line_in_summary

        one_line_in_summary(report)  # a near miss's table once, under its failure (CI=true)
        self.accounting.logreport(report)

    # -- the end ---------------------------------------------------------------------------------------

    def session_finish(self, session: pytest.Session, exitstatus: int) -> int:
        """The end (run/end/finish.py: collect -> judge -> publish), handed what this session kept."""
        from pytest_slam.run.end.handover import handed

        return finish(handed(self, session, exitstatus)).status
