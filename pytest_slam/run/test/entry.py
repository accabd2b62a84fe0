"""One swapped test, from its fixture to its report: entry, answers fetched ahead, the checks after
its call, its one-line failure and the Outcome attached to each report (xdist carries reports)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from pytest_slam.records import ModelSpec
from pytest_slam.run.score.verdict import CTX, TestVerdict
from pytest_slam.run.test.selection import Selection, not_enabled_line
from pytest_slam.settings import Settings
from pytest_slam.util.foreign import xdist_pending

if TYPE_CHECKING:  # imported when the swap arms: a run that opts nothing in never loads them
    from pytest_slam.golden.prefetch import ReferenceQueue
    from pytest_slam.run.score.checks import Checker
    from pytest_slam.run.test.fetching import Planner
    from pytest_slam.run.wired.fixtures import ReferenceClient, SlamModel
    from pytest_slam.run.wired.wiring import Swap

VERDICT = pytest.StashKey[TestVerdict]()


@dataclass(eq=False)
class TestEntry:
    """A process's tests through its swap (none: a run that is not armed, or xdist's controller)."""

    __test__ = False  # not a test class, whatever pytest's collector thinks of the name

    config: pytest.Config
    settings: Settings
    specs: dict[str, ModelSpec]
    selection: Selection
    role: str
    engine_errors: dict[str, str]  # model name -> why its engine did not start
    allowed_hosts: tuple[str, ...] = ()  # --slm-allowed-hosts, else ini slm_allowed_hosts
    swap: Swap | None = None
    checker: Checker | None = None
    planner: Planner | None = None  # which requests the tests will send (run/test/fetching.py)
    order: dict[int, int] = field(default_factory=dict)  # id(item) -> its place in the run
    # a refresh's reference engine serves its fetches: a serial run starts it before planning
    ensure_engines: Callable[[], None] | None = None

    def enter_test(self, item: pytest.Item, name: str | None) -> Generator[SlamModel, None, None]:
        """Fixture body: make this test's calls go to model ``name`` and record them."""
        from pytest_slam.run.score.pairing import wants_reference
        from pytest_slam.run.test.optin import base_test_id, mark_problem, module_of
        from pytest_slam.run.wired.fixtures import SlamModel
        from pytest_slam.swap import redirect
        from pytest_slam.swap.egress import watch_test
        from pytest_slam.swap.router import TestContext

        swap = self.swap
        if not self.selection.armed:  # under xdist: each worker's test says it in one line
            pytest.fail(not_enabled_line([item.nodeid]), pytrace=False)
        if name is None or swap is None:
            raise pytest.UsageError(
                f"pytest-slam: {item.nodeid} uses slm_model outside a model run"
            )
        problem = mark_problem(item)
        if problem:
            pytest.fail(problem, pytrace=False)
        block = bool(getattr(self.config.option, "slm_block_network", False))
        watch_test(swap.router, item.nodeid, block, self.allowed_hosts)  # what leaves: egress.py
        if name in self.engine_errors:  # an engine that did not start (its first call, or xdist)
            pytest.fail(self.engine_errors[name], pytrace=False)
        ctx = TestContext(
            item.nodeid, base_test_id(item.nodeid, name), module_of(item.nodeid), self.specs[name]
        )
        ctx.paired = wants_reference(item)
        item.stash[CTX] = ctx
        self.fetch_ahead(item)
        with swap.router.running(ctx):
            rule = swap.redirect()
            try:
                yield SlamModel(self.specs[name], swap.proxy.url_for(f"m/{name}"), ctx)
            finally:
                redirect.uninstall(rule)

    def fetch_ahead(self, item: pytest.Item) -> None:
        """Before a test runs: what earlier tests left unclaimed is let go, and the requests of
        the tests after it (under xdist, of those this worker has been handed so far), as many
        as the planner's budget of calls ahead takes, are queued to be fetched ahead
        (run/test/fetching.py, swap/ahead.py); in a refresh, the reference's (golden/prefetch.py),
        its candidates asked live."""
        swap = self.swap
        if swap is None or swap.store is None:
            return
        ahead, refresh = swap.router.ahead, swap.reference.ahead if swap.reference else None
        if ahead is None and refresh is None:
            return
        items = item.session.items
        planner = self.planner or self._planner(swap, items)
        order = self.order.get(id(item), -1)
        for queue in (ahead, refresh):
            if queue is not None:
                queue.passed(order)
        later = planner.take(self._later(items, order, planner.through), order)
        if refresh is not None:
            self._plan_reference(planner, refresh, [(order, item), *later])
        if ahead is not None:
            for name, planned in planner.plan(later).items():
                ahead.plan(self.specs[name], planned)

    def _planner(self, swap: Swap, items: list[pytest.Item]) -> Planner:
        """The run's planner, made at its first test; the run's judge pairs are asked ahead too
        where candidates' answers are (run/test/judge_ahead.py)."""
        from pytest_slam.run.test.fetching import Planner, budget
        from pytest_slam.swap.limits import ceiling_of

        self.order = {id(it): i for i, it in enumerate(items)}
        cap = (self.settings.cap_factor, self.settings.cap_margin)
        assert swap.store is not None  # fetch_ahead's guard
        self.planner = Planner(swap.store, self.specs, self.settings.repeat, cap)
        models = [*self.specs.values(), *([swap.reference.spec] if swap.reference else [])]
        # an adaptive limit may climb to its top: planned as far ahead as the broker's window
        # (sized at 16, the window held a climbing limit at 21 in flight of its 31: issue 49)
        self.planner.budget = budget(ceiling_of(spec) for spec in models)
        if swap.router.ahead is not None:
            from pytest_slam.run.test import judge_ahead

            self.planner.judging = judge_ahead.follow(swap.router.ahead, self.checker)
        return self.planner

    def _plan_reference(
        self, planner: Planner, refresh: ReferenceQueue, now: list[tuple[int, pytest.Item]]
    ) -> None:
        """A refresh: this test's own requests too (an entry is recorded once, by the first test
        asking it) and the later ones, to the reference, whose engine serves them."""
        swap = self.swap
        assert swap is not None and swap.reference is not None  # fetch_ahead's guard
        from pytest_slam.swap.engines import needs_engine

        spec = swap.reference.spec
        if needs_engine(spec) and self.ensure_engines is not None:
            self.ensure_engines()
        refresh.plan(planner.plan_reference(now, spec, self.settings.samples))

    def _later(
        self, items: list[pytest.Item], order: int, through: int
    ) -> Iterator[tuple[int, pytest.Item]]:
        """The tests after the one at ``order`` not planned yet (the planner has planned up to
        ``through``), lazily: under xdist those this worker has been handed, else the selection."""
        start = max(order, through) + 1
        if self.role == "worker":
            return ((i, items[i]) for i in xdist_pending(self.config) if i >= start)
        return ((i, items[i]) for i in range(start, len(items)))

    def reference_client(self, item: pytest.Item) -> ReferenceClient:
        client = self.swap.reference_client(item) if self.swap is not None else None
        if client is None:
            pytest.fail(
                "pytest-slam: gpt4_reference needs a reference model ([tool.slam] reference)",
                pytrace=False,
            )
        return client

    def run_test(self, item: pytest.Item) -> Generator[None, object, object]:
        """Wraps the test call: after the test's own assertions, the swap's checks."""
        ctx = item.stash.get(CTX, None)
        checker = self.checker
        try:
            result = yield
        except (KeyboardInterrupt, SystemExit):
            raise  # stopping: ask nothing more of any model
        except BaseException as exc:
            if ctx is not None:
                ctx.settle()  # a call still in flight is a failed call of this test
                ctx.raised(exc)  # a framework's timeout: the runaway it never read is not one
            if ctx is not None and checker is not None:
                item.stash[VERDICT] = self._scored(item, checker.run(item, ctx, failed=True))
            raise
        if ctx is not None:
            ctx.settle()
        if ctx is None or checker is None:
            return result
        verdict = item.stash[VERDICT] = self._scored(item, checker.run(item, ctx, failed=False))
        if verdict.problems:
            from pytest_slam.run.test.outcomes import problems_message

            pytest.fail(problems_message(ctx.model.name, verdict.problems), pytrace=False)
        return result

    def _scored(self, item: pytest.Item, verdict: TestVerdict) -> TestVerdict:
        """``pytest_slam_pair_scored`` (hookspecs.py): each pair of this test, once scored."""
        hook = self.config.hook.pytest_slam_pair_scored
        if not hook.get_hookimpls():  # nobody listens: no hook call per pair (most runs)
            return verdict
        ctx = item.stash[CTX]
        for pair in verdict.pairs:
            hook(item=item, model=ctx.model.name, pair=pair)
        return verdict

    def shorten(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> pytest.ExceptionInfo[BaseException] | None:
        """Before a swapped test's failed call is reported: its one-line failure in place of the
        product's exception, which is returned to be put back (outcomes.shortened)."""
        if call.excinfo is None or not self.selection.is_swapped(item):
            return None
        from pytest_slam.run.test.outcomes import shortened

        return shortened(item, item.stash.get(CTX, None), call, item.stash.get(VERDICT, None))

    def annotate(
        self, item: pytest.Item, report: pytest.TestReport, crash: str | None = None
    ) -> None:
        """Attach this test's Outcome to its report: reports are what xdist carries home.
        ``crash``: the product's exception, when ``shorten`` put the one-line failure in its place."""
        if not self.selection.is_swapped(item):
            return
        if report.when == "teardown":
            self._release(item, report)
            return
        if report.when != "call" and report.passed:
            return
        self._annotate(item, report, crash)

    def _release(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """The test's last report: a failed teardown gets its outcome, then the test's context
        and verdict leave the item (its outcome holds what the report needs), so the run keeps
        one copy of each test's calls, not three for every later garbage collection to walk."""
        if report.failed:
            self._annotate(item, report, None)
        if CTX in item.stash:
            del item.stash[CTX]
        if VERDICT in item.stash:
            del item.stash[VERDICT]

    def _annotate(self, item: pytest.Item, report: pytest.TestReport, crash: str | None) -> None:
        from pytest_slam.report.junit_props import attach as attach_junit_properties
        from pytest_slam.report.packed import pack
        from pytest_slam.run.test.outcomes import (
            build_outcome,
            calls_account,
            cut_message,
            one_line_failure,
            verdict_failure,
        )

        ctx = item.stash.get(CTX, None)
        outcome = build_outcome(item, report, ctx, item.stash.get(VERDICT, None), crash)
        # An extra attribute, as pytest's own ``TestReport(**extra)`` sets them: xdist ships it.
        # Packed (report/packed.py): the run keeps every report, and this string is what it keeps.
        vars(report)["slam"] = pack(outcome)
        attach_junit_properties(item, report, outcome)
        verdict = item.stash.get(VERDICT, None)
        line = one_line_failure(ctx, report.failed, verdict)
        if line:
            report.longrepr = line
        elif report.failed and report.when == "call":
            line = verdict_failure(ctx, verdict)  # the reason first, no "Failed:" before it
            if line:
                report.longrepr = line
            account = calls_account(ctx, verdict)  # after the framework's own exception
            if account:
                report.sections.append(("pytest-slam", account))
        cut = cut_message(ctx)
        if cut:  # named on the test it cut, under its failure or with -rP, not only in the summary
            report.sections.append(("pytest-slam", cut))
