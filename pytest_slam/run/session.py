"""SlamSession: one pytest run's engines and swap, and the role objects the hooks hand off to.

Process roles: ``serial`` (no xdist) does everything; under xdist the ``controller`` owns the
engines, merges what the workers publish and writes the reports, and each ``worker`` runs tests
through its own loopback swap proxy.

The session owns the engines, the swap (router, proxy, reference, checker) and one test's entry
and exit. What each part of the run keeps is an object of its own, unit-tested without pytest runs:
``Selection`` (run/selection.py: what was collected and selected), ``Accounting``
(run/accounting.py: each test's outcome, which finished, what workers sent), ``Summary``
(run/summary.py: the section's lines); at the end run/handover.py hands what the session kept to
``finish`` (run/finish.py: collect -> judge -> publish).
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import threading
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pytest

from pytest_slam.records import Call, ModelSpec, utc_now
from pytest_slam.run.accounting import Accounting
from pytest_slam.run.finish import drop_older_reports, finish
from pytest_slam.run.selection import Selection, not_enabled_line
from pytest_slam.run.summary import Summary
from pytest_slam.run.verdict import CTX, TestVerdict
from pytest_slam.settings import Settings
from pytest_slam.swap import models as model_specs
from pytest_slam.swap.chat import Target, forward_chat
from pytest_slam.swap.engines import EngineError, Running, needs_engine, start_engine
from pytest_slam.swap.limits import concurrency_of
from pytest_slam.util.foreign import tmp_path_factory, xdist_pending

if TYPE_CHECKING:  # imported when the swap arms: a run that opts nothing in never loads them
    from pytest_slam.golden.reference import ReferenceService
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.metrics.metering import EnergyMeter
    from pytest_slam.run.checks import Checker
    from pytest_slam.run.fetching import Planner
    from pytest_slam.run.fixtures import ReferenceClient, SlamModel
    from pytest_slam.run.progress import Progress
    from pytest_slam.run.tables import Tables
    from pytest_slam.swap.ahead import Ahead
    from pytest_slam.swap.cache import AnswerCache
    from pytest_slam.swap.limits import Limiter
    from pytest_slam.swap.proxy import SwapProxy
    from pytest_slam.swap.redirect import Redirect
    from pytest_slam.swap.router import SwapRouter

MAX_SLOTS = 256  # an engine's parallel slots, however many processes and calls in flight
VERDICT = pytest.StashKey[TestVerdict]()
WARMUP = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4, "temperature": 0}


class WorkerInput(TypedDict):
    """What a worker needs to use the controller's engines (plain data: xdist ships it)."""

    endpoints: dict[str, list[str]]  # model name -> its engine's base URLs
    engine_errors: dict[str, str]  # model name -> why its engine did not start


def process_role(config: pytest.Config) -> str:
    if hasattr(config, "workerinput"):
        return "worker"
    dist = getattr(config.option, "dist", "no")
    numprocesses = getattr(config.option, "numprocesses", None)
    if dist != "no" and numprocesses != 0 and not getattr(config.option, "collectonly", False):
        return "controller"
    return "serial"


@dataclass
class EngineStart:
    """What starting one engine took, and its first (cold) call, kept out of the percentiles."""

    model: str
    start_s: float | None
    cold_call: Call | None = None
    error: str | None = None


@dataclass(eq=False)
class SlamSession:
    config: pytest.Config
    settings: Settings
    specs: dict[str, ModelSpec]
    selection: Selection
    accounting: Accounting
    summary: Summary
    role: str = "serial"
    allowed_hosts: tuple[str, ...] = ()  # --slm-allowed-hosts, else ini slm_allowed_hosts
    reference_spec: ModelSpec | None = None
    judge_spec: ModelSpec | None = None
    engines: list[Running] = field(default_factory=list)
    engine_starts: list[EngineStart] = field(default_factory=list)
    # a serial run's engines start at a test's first model call, from the proxy's threads: once
    starting: threading.Lock = field(default_factory=threading.Lock)
    engine_errors: dict[str, str] = field(default_factory=dict)
    saved_env: dict[str, str | None] = field(default_factory=dict)
    router: SwapRouter | None = None
    proxy: SwapProxy | None = None
    store: GoldenStore | None = None
    reference: ReferenceService | None = None
    log_dir: Path | None = None  # the engines' logs, made when the run starts an engine
    engines_checked: bool = False  # start_engines ran: what the run needs is started (or failed)
    checker: Checker | None = None
    energy: EnergyMeter | None = None
    started: str = ""
    gpu_line: str = ""
    embeddings_spec: ModelSpec | None = None  # [tool.slam] embeddings
    redirected: set[str] = field(default_factory=set)  # hosts whose calls redirect.py swapped
    progress: Progress | None = None  # engine lines and heartbeats (run/progress.py)
    ahead: Ahead | None = None  # answers fetched ahead of the tests (swap/ahead.py)
    cache: AnswerCache | None = None  # candidates' answers kept between runs, opt-in
    planner: Planner | None = None  # which requests the tests will send (run/fetching.py)
    order: dict[int, int] = field(default_factory=dict)  # id(item) -> its place in the run

    @property
    def armed(self) -> bool:
        return self.selection.armed

    @property
    def runs_tests(self) -> bool:
        return self.role != "controller"

    # -- engines (serial process or xdist controller) ------------------------------------------

    def engine_specs(self) -> list[ModelSpec]:
        """Local models whose engine this run must start: candidates, plus a local reference/judge."""
        wanted = list(self.specs.values())
        if self.reference_spec is not None and self.settings.record != "none":
            wanted.append(self.reference_spec)
        if self.judge_spec is not None and all(s is not self.judge_spec for s in wanted):
            wanted.append(self.judge_spec)  # a judge that is also a candidate shares its engine
        return [spec for spec in wanted if needs_engine(spec)]

    def start_engines(self) -> None:
        """Start every local engine, one slot per xdist worker; logs go under pytest's basetemp,
        so its retention removes them (``-p no:tmpdir``: the system temp dir). A run with no
        local engine makes no log folder."""
        self.engines_checked = True
        specs = self.engine_specs()
        if not specs:
            return
        factory = tmp_path_factory(self.config)
        self.log_dir = (
            factory.mktemp("slam-engines")
            if factory is not None
            else Path(tempfile.mkdtemp(prefix="slam-engines-"))
        )
        workers = len(getattr(self.config.option, "tx", None) or []) or 1  # xdist's -n, resolved
        processes = workers if self.role == "controller" else 1
        say, beat_s = (self.progress.say, self.progress.interval_s) if self.progress else (None, 0)
        for spec in specs:
            # a slot for every call in flight: each test process's limit (swap/limits.py)
            slots = min(processes * (spec.concurrency or 1), MAX_SLOTS)
            try:
                server = start_engine(
                    spec, self.log_dir, self.settings.engine_timeout_s, slots, say, beat_s
                )
            except (EngineError, model_specs.ModelSpecError) as exc:
                self.engine_errors[spec.name] = str(exc)
                self.engine_starts.append(EngineStart(spec.name, None, error=str(exc)))
                continue
            self.engines.append(server)
            self.summary.append(server.start_line())
            self.engine_starts.append(EngineStart(spec.name, server.started_s, self._warm(spec)))

    def _warm(self, spec: ModelSpec) -> Call:
        """The first call after an engine starts is a cold start: made here, reported on its own
        (and named as the engine's by the heartbeat, not as the test that happens to run)."""
        named = self.progress.naming(f"(engine start: {spec.name})") if self.progress else None
        with named or contextlib.nullcontext():
            result = forward_chat(
                Target(spec, spec.base_urls[0], None), dict(WARMUP, model=spec.model_id)
            )
        result.call.cold_start = True
        return result.call

    def stop_engines(self) -> None:
        for server in self.engines:
            server.stop()
        self.engines.clear()

    def worker_input(self) -> WorkerInput:
        everything = [*self.specs.values(), self.reference_spec, self.judge_spec]
        return {
            "endpoints": {s.name: s.base_urls for s in everything if s is not None},
            "engine_errors": dict(self.engine_errors),
        }

    def apply_worker_input(self, data: WorkerInput) -> None:
        everything = [*self.specs.values(), self.reference_spec, self.judge_spec]
        for spec in everything:
            if spec is not None and data["endpoints"].get(spec.name):
                spec.base_urls = list(data["endpoints"][spec.name])
        self.engine_errors.update(data["engine_errors"])

    # -- the swap (every process that runs tests) -----------------------------------------------

    def start_swap(self) -> None:
        """The run's swap, each part handed its collaborators as it is built (no part is
        changed afterwards): golden side, targets, limits, answers fetched ahead, router, proxy."""
        from pytest_slam.golden.embeddings import EmbeddingsService
        from pytest_slam.swap.ahead import Ahead
        from pytest_slam.swap.proxy import SwapProxy
        from pytest_slam.swap.router import SwapRouter, Upstream, candidate_forward
        from pytest_slam.swap.targets import Targets

        if self.settings.has_reference and self.reference_spec is not None:
            self.reference = self._reference_service(self.reference_spec)
        original = Upstream.from_env(dict(os.environ))
        # a serial run's engines start at the first call (a test's, or one fetched ahead)
        targets = Targets(self.engine_errors, self.ensure_engines)
        limiters = self.limiters()
        cache = self.answer_cache()
        self.ahead = Ahead(limiters, targets.candidate, candidate_forward(self.energy), cache)
        self.router = SwapRouter(
            self.specs,
            original,
            targets=targets,
            golden=self.reference,
            meter=self.energy,
            embedder=EmbeddingsService(original.base_url, self.embeddings_spec, self.reference),
            # a refresh (--slm-record=all) re-records each reference answer before the candidate
            # is asked, so the cap a fetched request carried may no longer be the call's: the
            # candidate would be asked twice; it is asked live instead (the reference's answers
            # are fetched ahead in a refresh: golden/prefetch.py)
            ahead=self.ahead
            if self.reference is not None and self.settings.record != "all"
            else None,
            limiters=limiters,
            cache=cache,
            cap=(self.settings.cap_factor, self.settings.cap_margin),
        )
        if self.reference is not None and self.reference.ahead is not None:  # a refresh: closed
            # and counted with the candidates' (its own recordings claim them)
            self.ahead.attach(f"{self.reference.spec.name} (reference)", self.reference.ahead)
        self.proxy = SwapProxy(self.router).start()
        self._set_env("OPENAI_BASE_URL", self.proxy.base_url)
        if not os.environ.get("OPENAI_API_KEY"):
            self._set_env("OPENAI_API_KEY", model_specs.PLACEHOLDER_KEY)

    def limiters(self) -> dict[str, Limiter]:
        """Each candidate's calls in flight under its concurrency (swap/limits.py)."""
        from pytest_slam.swap.limits import Limiter

        say = self.progress.say if self.progress is not None else None
        return {
            name: Limiter(name, spec.concurrency or 1, say) for name, spec in self.specs.items()
        }

    def answer_cache(self) -> AnswerCache | None:
        """The candidates' kept answers, when the project opted in (swap/cache.py)."""
        if not self.settings.cache:
            return None
        from pytest_slam.swap.cache import FOLDER, AnswerCache
        from pytest_slam.util.files import scratch_folder

        golden_root = Path(self.config.rootpath) / self.settings.golden_dir
        self.cache = AnswerCache(scratch_folder(golden_root) / FOLDER, self.settings.cache_ttl_s)
        return self.cache

    def _reference_service(self, spec: ModelSpec) -> ReferenceService:
        from pytest_slam.golden.reference import ReferenceService
        from pytest_slam.golden.store import GoldenStore

        root = Path(self.config.rootpath) / self.settings.golden_dir
        self.store = GoldenStore(root, self.settings.reference)
        from pytest_slam.swap.limits import Limiter

        override = getattr(self.config.option, "slm_concurrency", None)
        concurrency = concurrency_of(spec, override, self.settings.concurrency)
        say = self.progress.say if self.progress is not None else None
        reference = ReferenceService(
            spec,
            self.store,
            self.settings.record,
            self.settings.samples,
            self.settings.reference_retries,
            self.settings.reference_timeout_s,
            limiter=Limiter(spec.name, concurrency, say),  # a refresh fetches within it
        )
        if self.config.option.slm_models:  # so the printed record command selects the same models
            reference.record_args = f"--slm-models={self.config.option.slm_models}"
        return reference

    def _set_env(self, name: str, value: str) -> None:
        self.saved_env.setdefault(name, os.environ.get(name))
        os.environ[name] = value

    def stop_swap(self) -> None:
        for name, value in self.saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.saved_env.clear()
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None

    def close(self) -> None:
        if self.ahead is not None:  # an interrupt: nothing more is sent, nothing waits on it
            self.ahead.close()
        self.stop_swap()
        self.stop_engines()
        if self.progress is not None:
            self.progress.close()
        if self.energy is not None:
            self.energy.close()

    # -- lifecycle hooks --------------------------------------------------------------------------

    def prepare(self) -> None:
        """At configure time: a worker learns the engines' URLs; a test process arms the swap."""
        if not self.armed:
            return
        self.open_progress()
        if self.role != "worker":
            self.check_report_paths()
            self.check_golden_store()
        if self.role == "worker":  # xdist sets ``workerinput`` on a worker's config only
            worker_input: dict[str, WorkerInput] = getattr(self.config, "workerinput", {})
            self.apply_worker_input(worker_input["slam"])
        self.open_energy_meter()
        if self.runs_tests:
            self.start_swap()
            self.checker = self._checker()

    def open_progress(self) -> None:
        """Progress lines (run/progress.py): a worker's go to the controller, which prints them."""
        from pytest_slam.run.progress import WORKER_KEY, Progress

        progress = self.progress = Progress(self.config, self.role)
        if self.role == "worker":
            progress.connect(getattr(self.config, "workerinput", {}).get(WORKER_KEY))
        self.config.pluginmanager.register(progress, "slam-progress")
        progress.start()

    def open_energy_meter(self) -> None:
        """NVML for the candidates a GPU serves; its line is the run's ``gpu_telemetry``."""
        from pytest_slam.metrics.metering import EnergyMeter

        self.energy = EnergyMeter(self.specs.values())
        self.gpu_line = self.energy.line

    @functools.cached_property
    def tables(self) -> Tables:
        """``[tool.slam]``'s tables, parsed once for the checks and the end of the run."""
        from pytest_slam.run.tables import Tables
        from pytest_slam.util.files import scratch_folder

        golden_root = Path(self.config.rootpath) / self.settings.golden_dir
        return Tables.of(self.settings, scratch=scratch_folder(golden_root))

    def _checker(self) -> Checker:
        from pytest_slam.run.checks import Checker
        from pytest_slam.run.judging import JudgeModel

        judge = JudgeModel(self.judge_spec) if self.judge_spec is not None else None
        return Checker(
            self.reference,
            dict(self.settings.equivalence),
            self.tables.prices,
            judge=judge,
            record_mode=self.settings.record,
            summary=self.summary.lines,
            scorer_timeout_s=self.settings.scorer_timeout_s,
            accept_uncertified_judge=self.settings.accept_uncertified_judge,
        )

    def check_report_paths(self) -> None:
        """A report that cannot be written is said now, not after an hour of model calls."""
        from pytest_slam.run import options

        for path, flag in (
            (self.settings.report, options.REPORT),
            (self.settings.html, options.HTML),
        ):
            problem = options.check_writable(path, flag)
            if problem:
                raise pytest.UsageError(f"pytest-slam: {problem}")

    def check_golden_store(self) -> None:
        """No run reads a store a killed promote half changed (golden/journal.py before_a_run)."""
        if self.settings.has_reference and not self.config.option.collectonly:
            from pytest_slam.golden.journal import before_a_run
            from pytest_slam.util.files import scratch_folder

            root = Path(self.config.rootpath) / self.settings.golden_dir
            recording = self.settings.record != "none"
            line = before_a_run(root, scratch_folder(root) / "locks", recording)
            if line:
                self.summary.append(line.removeprefix("slam golden: "))

    def session_start(self) -> None:
        """xdist's controller starts the engines before its workers exist, to hand them the URLs.

        First, the stale report says "a run is under way": a run killed from here on (even before
        ``pytest_sessionfinish``) leaves nothing that ``slam golden prune`` would act on.
        """
        if self.armed and self.role != "worker" and not self.config.option.collectonly:
            self.mark_run_started()
        if self.armed and self.role == "controller" and not self.config.option.collectonly:
            try:
                self.start_engines()
            except KeyboardInterrupt:  # pytest skips sessionfinish (and its summary) from here
                self._interrupted_at_start()
                raise

    def _interrupted_at_start(self) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        for line in drop_older_reports(self.settings):
            if terminal is not None:
                terminal.write_line(f"pytest-slam: {line}")

    def mark_run_started(self) -> None:
        from pytest_slam.golden.stale import mark_run_started

        if self.settings.has_reference:
            root = Path(self.config.rootpath) / self.settings.golden_dir
            mark_run_started(root, self.settings.reference)

    def ensure_engines(self) -> None:
        """A serial run starts its engines at the first model call of an opted-in test (the
        router asks, swap/router.py ``starter``): a run whose tests make none, or only embeddings
        calls, starts nothing."""
        if self.role != "serial" or self.engines_checked:
            return
        with self.starting:
            if not self.engines_checked:
                self.start_engines()

    # -- collection (run/selection.py) -------------------------------------------------------------

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # xdist's controller hears of its workers' failed collections too
            self.selection.collect_failed()

    def is_swapped(self, item: pytest.Item) -> bool:
        return self.selection.is_swapped(item)

    # -- one test ------------------------------------------------------------------------------------

    def enter_test(self, item: pytest.Item, name: str | None) -> Generator[SlamModel, None, None]:
        """Fixture body: make this test's calls go to model ``name`` and record them."""
        from pytest_slam.run.fixtures import SlamModel
        from pytest_slam.run.optin import base_test_id, mark_problem, module_of
        from pytest_slam.run.pairing import wants_reference
        from pytest_slam.swap.egress import watch_test
        from pytest_slam.swap.router import TestContext

        router, proxy = self.router, self.proxy
        if not self.armed:  # under xdist: each worker's test says it in one line
            pytest.fail(not_enabled_line([item.nodeid]), pytrace=False)
        if name is None or router is None or proxy is None:
            raise pytest.UsageError(
                f"pytest-slam: {item.nodeid} uses slm_model outside a model run"
            )
        problem = mark_problem(item)
        if problem:
            pytest.fail(problem, pytrace=False)
        block = bool(getattr(self.config.option, "slm_block_network", False))
        watch_test(router, item.nodeid, block, self.allowed_hosts)  # what leaves: egress.py
        if name in self.engine_errors:  # an engine that did not start (its first call, or xdist)
            pytest.fail(self.engine_errors[name], pytrace=False)
        ctx = TestContext(
            item.nodeid, base_test_id(item.nodeid, name), module_of(item.nodeid), self.specs[name]
        )
        ctx.paired = wants_reference(item)
        item.stash[CTX] = ctx
        self.fetch_ahead(item)
        router.active = ctx
        rule = self._redirect(proxy)
        try:
            yield SlamModel(self.specs[name], proxy.url_for(f"m/{name}"), ctx)
        finally:
            router.active = None
            from pytest_slam.swap import redirect

            redirect.uninstall(rule)

    def fetch_ahead(self, item: pytest.Item) -> None:
        """Before a test runs: what earlier tests left unclaimed is let go, and the requests of
        the tests after it (all of them, or under xdist those this worker has been handed so
        far) are queued to be fetched ahead (run/fetching.py, swap/ahead.py)."""
        from pytest_slam.run.fetching import Planner

        ahead = self.router.ahead if self.router is not None else None
        # a refresh: the reference's answers (golden/prefetch.py), its candidates asked live
        refresh = self.reference.ahead if self.reference is not None else None
        if (ahead is None and refresh is None) or self.store is None:
            return
        items = item.session.items
        first = self.planner is None
        if self.planner is None:
            self.order = {id(it): i for i, it in enumerate(items)}
            cap = (self.settings.cap_factor, self.settings.cap_margin)
            self.planner = Planner(self.store, self.specs, self.settings.repeat, cap)
            if ahead is not None:  # the run's judge pairs asked ahead too
                from pytest_slam.run import judge_ahead

                self.planner.judging = judge_ahead.follow(
                    ahead, self.checker, self.settings, self.config
                )
        order = self.order.get(id(item), -1)
        for queue in (ahead, refresh):
            if queue is not None:
                queue.passed(order)
        if self.role == "worker":  # handed a few tests at a time: what came since, each test
            pending = xdist_pending(self.config)
            later = [(i, items[i]) for i in pending if i > order]
        elif first:  # the whole selection, once
            later = [(i, items[i]) for i in range(order + 1, len(items))]
        else:
            return
        if refresh is not None and self.reference is not None:
            spec = self.reference.spec
            if needs_engine(spec):  # its engine serves the fetches (a serial run starts it here)
                self.ensure_engines()
            # this test's own requests too: an entry is recorded once, by the first test asking
            now = [(order, item), *later]
            refresh.plan(self.planner.plan_reference(now, spec, self.settings.samples))
        if ahead is not None:
            for name, planned in self.planner.plan(later).items():
                ahead.plan(self.specs[name], planned)

    def _redirect(self, proxy: SwapProxy) -> Redirect:
        """For this test only: clients that ignore OPENAI_BASE_URL (``AzureOpenAI``, an explicit
        ``base_url`` on a listed host) reach the proxy too (redirect.py). Only during opted-in
        tests, so the plugin changes nothing elsewhere and a caller's key never travels on."""
        from pytest_slam.swap import redirect

        hosts = [*redirect.DEFAULT_HOSTS, *self.settings.redirect_hosts]
        return redirect.install(
            lambda: proxy.base_url,
            hosts,
            lambda r: self.redirected.add(r.original_url.split("/")[2]),
            server=proxy,
        )

    def reference_client(self, item: pytest.Item) -> ReferenceClient:
        from pytest_slam.run.fixtures import ReferenceClient

        if self.reference is None or self.proxy is None:
            pytest.fail(
                "pytest-slam: gpt4_reference needs a reference model ([tool.slam] reference)",
                pytrace=False,
            )
        return ReferenceClient(self.proxy.url_for("ref"), item.stash[CTX], self.reference)

    def run_test(self, item: pytest.Item) -> Generator[None, object, object]:
        """Wraps the test call: after the test's own assertions, the swap's checks."""
        ctx = item.stash.get(CTX, None)
        checker = self.checker
        try:
            result = yield
        except (KeyboardInterrupt, SystemExit):
            raise  # stopping: ask nothing more of any model
        except BaseException:
            if ctx is not None:
                ctx.settle()  # a call still in flight is a failed call of this test
            if ctx is not None and checker is not None:
                item.stash[VERDICT] = self._scored(item, checker.run(item, ctx, failed=True))
            raise
        if ctx is not None:
            ctx.settle()
        if ctx is None or checker is None:
            return result
        verdict = item.stash[VERDICT] = self._scored(item, checker.run(item, ctx, failed=False))
        if verdict.problems:
            from pytest_slam.run.outcomes import problems_message

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
        if call.excinfo is None or not self.is_swapped(item):
            return None
        from pytest_slam.run.outcomes import shortened

        return shortened(item, item.stash.get(CTX, None), call)

    def annotate(
        self, item: pytest.Item, report: pytest.TestReport, crash: str | None = None
    ) -> None:
        """Attach this test's Outcome to its report: reports are what xdist carries home.
        ``crash``: the product's exception, when ``shorten`` put the one-line failure in its place."""
        if not self.is_swapped(item):
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
        from pytest_slam.run.outcomes import (
            build_outcome,
            calls_account,
            cut_message,
            one_line_failure,
            verdict_failure,
        )

        ctx = item.stash.get(CTX, None)
        outcome = build_outcome(item, report, ctx, item.stash.get(VERDICT, None), crash)
        # An extra attribute, as pytest's own ``TestReport(**extra)`` sets them: xdist ships it.
        vars(report)["slam"] = outcome
        attach_junit_properties(item, report, outcome)
        line = one_line_failure(ctx, report.failed)
        verdict = item.stash.get(VERDICT, None)
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

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.accounting.logreport(report)

    # -- the end ---------------------------------------------------------------------------------------

    def session_finish(self, session: pytest.Session, exitstatus: int) -> int:
        """The end (run/finish.py: collect -> judge -> publish), handed what this session kept."""
        from pytest_slam.run.handover import handed

        return finish(handed(self, session, exitstatus)).status


def build(config: pytest.Config, settings: Settings, armed: bool) -> SlamSession:
    """Resolve every model spec up front, so a typo fails at the door as a usage error.

    ``pytest_slam_models`` (hookspecs.py) may edit the candidate list first.
    """
    names = list(settings.models or [model_specs.DEFAULT_MODEL])
    if armed:
        config.hook.pytest_slam_models(config=config, models=names)
    specs = {s.name: s for s in model_specs.resolve_all(names, settings.model_table)}
    if settings.max_tokens_cap is not None:  # one line for every model, the embedded one included
        for spec in specs.values():
            spec.max_tokens_cap = settings.max_tokens_cap
    override = getattr(config.option, "slm_concurrency", None)
    for spec in specs.values():  # in force, kept on the spec: the report says it, a baseline too
        spec.concurrency = concurrency_of(spec, override, settings.concurrency)
    role = process_role(config)
    rootpath = Path(config.rootpath)
    selection = Selection(armed, role, list(specs), rootpath, [str(a) for a in config.args])
    summary = Summary(rootpath)
    session = SlamSession(config, settings, specs, selection, Accounting(role), summary, role)
    if settings.has_reference:
        session.reference_spec = model_specs.resolve(settings.reference, settings.model_table)
    if settings.judge:  # a candidate's model as the judge: the same spec, so one engine
        judge = model_specs.resolve(settings.judge, settings.model_table)
        session.judge_spec = specs.get(judge.name, judge)
    if settings.embeddings:
        spec = model_specs.resolve(settings.embeddings, settings.model_table)
        if needs_engine(spec):
            raise model_specs.ModelSpecError(
                f"[tool.slam] embeddings = {settings.embeddings!r} is a model pytest-slam would "
                "have to start; name a running endpoint (http://HOST:PORT/v1#MODEL) or openai:MODEL."
            )
        session.embeddings_spec = spec
    from pytest_slam.golden.redact import secret_env

    keyed = [*specs.values(), session.reference_spec, session.judge_spec, session.embeddings_spec]
    secret_env(*(spec.api_key_env for spec in keyed if spec is not None))
    return session


def configure(config: pytest.Config) -> SlamSession:
    """Build the session from [tool.slam] and the command line; arm the swap where tests run."""
    from pytest_slam.project import from_table, read_table
    from pytest_slam.run import options

    table = read_table(_pyproject(config))
    cli = options.overrides(config.option, table)
    # every key checked, here, once; the project root decides the golden folder's old default
    settings = from_table(table, cli, root=Path(config.rootpath))
    ini_paths = config.getini("slm_paths")
    armed = settings.configured or "candidates" in cli or bool(ini_paths)
    session = build(config, settings, armed)
    session.selection.opt_in_paths = [Path(p).resolve() for p in ini_paths] + [
        (Path(config.rootpath) / p).resolve() for p in settings.paths
    ]
    session.allowed_hosts = options.allowed_hosts(config)
    note = options.record_note(config.option)
    if note and session.role != "worker":
        session.summary.append(note)
    session.started = utc_now()
    session.prepare()
    return session


def _pyproject(config: pytest.Config) -> Path | None:
    inipath = getattr(config, "inipath", None)
    if inipath is not None and Path(inipath).name == "pyproject.toml":
        return Path(inipath)
    candidate = Path(config.rootpath) / "pyproject.toml"
    return candidate if candidate.is_file() else None
