"""SlamSession: the state of one pytest run, in whichever process it lives.

Roles: ``serial`` (no xdist) does everything; under xdist the ``controller`` owns the engines, merges
what the workers publish and writes the reports, and each ``worker`` runs tests through its own
loopback swap proxy. Hooks in plugin.py only call the methods here.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pytest

from pytest_slam.records import Call, ModelSpec, utc_now
from pytest_slam.run.verdict import CTX, TestVerdict
from pytest_slam.settings import Settings
from pytest_slam.swap import models as model_specs
from pytest_slam.swap.chat import Target, forward_chat
from pytest_slam.swap.engines import EngineError, Running, needs_engine, start_engine

if TYPE_CHECKING:  # imported when the swap arms: a run that opts nothing in never loads them
    from pytest_slam.golden.reference import ReferenceService
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.metrics.metering import EnergyMeter
    from pytest_slam.report.aggregate import Verdict
    from pytest_slam.run.checks import Checker
    from pytest_slam.run.fixtures import ReferenceClient, SlamModel
    from pytest_slam.run.progress import Progress
    from pytest_slam.swap.proxy import SwapProxy
    from pytest_slam.swap.redirect import Redirect
    from pytest_slam.swap.router import SwapRouter

PLACEHOLDER_KEY = "sk-slam-placeholder-not-a-real-key"
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
    armed: bool
    role: str = "serial"
    reference_spec: ModelSpec | None = None
    judge_spec: ModelSpec | None = None
    engines: list[Running] = field(default_factory=list)
    engine_starts: list[EngineStart] = field(default_factory=list)
    engine_errors: dict[str, str] = field(default_factory=dict)
    not_enabled: list[str] = field(default_factory=list)  # opted-in tests of an unarmed run
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    worker_payloads: list[dict[str, Any]] = field(default_factory=list)
    saved_env: dict[str, str | None] = field(default_factory=dict)
    router: SwapRouter | None = None
    proxy: SwapProxy | None = None
    store: GoldenStore | None = None
    reference: ReferenceService | None = None
    log_dir: Path | None = None
    checker: Checker | None = None
    energy: EnergyMeter | None = None
    opt_in_paths: list[Path] = field(default_factory=list)
    coverage: set[str] = field(default_factory=set)
    partial: set[str] = field(default_factory=set)
    failed_tests: set[str] = field(default_factory=set)
    summary: list[str] = field(default_factory=list)
    last_line: str = ""  # the gate's verdict, printed after pytest's own summary (lastline.py)
    started: str = ""
    gpu_line: str = ""
    workers_lost: int = 0
    finished: set[str] = field(default_factory=set)  # tests whose teardown was reported
    deselected_count: int = 0
    collect_errors: int = 0
    embeddings_spec: ModelSpec | None = None  # [tool.slam] embeddings
    redirected: set[str] = field(default_factory=set)  # hosts whose calls redirect.py swapped
    progress: Progress | None = None  # engine lines and heartbeats (run/progress.py)

    @property
    def model_names(self) -> list[str]:
        return list(self.specs)

    @property
    def runs_tests(self) -> bool:
        return self.role != "controller"

    # -- engines (serial process or xdist controller) ------------------------------------------

    def engine_specs(self) -> list[ModelSpec]:
        """Local models whose engine this run must start: candidates, plus a local reference/judge."""
        wanted = list(self.specs.values())
        if self.reference_spec is not None and self.settings.record != "none":
            wanted.append(self.reference_spec)
        if self.judge_spec is not None:
            wanted.append(self.judge_spec)
        return [spec for spec in wanted if needs_engine(spec)]

    def start_engines(self) -> None:
        """Start every local engine, one slot per xdist worker; logs go under pytest's basetemp,
        so its retention removes them (``-p no:tmpdir``: the system temp dir)."""
        factory = getattr(self.config, "_tmp_path_factory", None)
        self.log_dir = (
            factory.mktemp("slam-engines")
            if factory is not None
            else Path(tempfile.mkdtemp(prefix="slam-engines-"))
        )
        workers = len(getattr(self.config.option, "tx", None) or []) or 1  # xdist's -n, resolved
        slots = workers if self.role == "controller" else 1
        say, beat_s = (self.progress.say, self.progress.interval_s) if self.progress else (None, 0)
        for spec in self.engine_specs():
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
        """The first call after an engine starts is a cold start: made here, reported on its own."""
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
        from pytest_slam.golden.embeddings import EmbeddingsService
        from pytest_slam.swap.proxy import SwapProxy
        from pytest_slam.swap.router import SwapRouter, Upstream

        router = self.router = SwapRouter(self.specs, Upstream.from_env(dict(os.environ)))
        router.engine_errors = self.engine_errors
        router.meter = self.energy
        router.cap_factor = self.settings.cap_factor
        router.cap_margin = self.settings.cap_margin
        self.proxy = SwapProxy(router).start()
        self._set_env("OPENAI_BASE_URL", self.proxy.base_url)
        if not os.environ.get("OPENAI_API_KEY"):
            self._set_env("OPENAI_API_KEY", PLACEHOLDER_KEY)
        if self.settings.has_reference and self.reference_spec is not None:
            self._start_reference(router, self.reference_spec)
        router.embedder = EmbeddingsService(
            router.original.base_url, self.embeddings_spec, self.reference
        )

    def _start_reference(self, router: SwapRouter, spec: ModelSpec) -> None:
        from pytest_slam.golden.reference import ReferenceService
        from pytest_slam.golden.store import GoldenStore

        root = Path(self.config.rootpath) / self.settings.golden_dir
        self.store = GoldenStore(root, self.settings.reference)
        reference = self.reference = ReferenceService(
            spec,
            self.store,
            self.settings.record,
            self.settings.samples,
            self.settings.reference_retries,
            self.settings.reference_timeout_s,
        )
        router.reference = reference.chat
        router.reference_tokens = reference.reference_first  # reference first
        if self.config.option.slm_models:  # so the printed record command selects the same models
            reference.record_args = f"--slm-models={self.config.option.slm_models}"

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

    def _checker(self) -> Checker:
        from pytest_slam.metrics.cost import Prices
        from pytest_slam.run.checks import Checker, JudgeModel

        judge = JudgeModel(self.judge_spec) if self.judge_spec is not None else None
        return Checker(
            self.reference,
            dict(self.settings.equivalence),
            Prices.from_config(self.settings.prices),
            judge=judge,
            record_mode=self.settings.record,
            summary=self.summary,
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
        from pytest_slam.run.finish import drop_older_reports

        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        for line in drop_older_reports(self):
            if terminal is not None:
                terminal.write_line(f"pytest-slam: {line}")

    def mark_run_started(self) -> None:
        from pytest_slam.golden.stale import mark_run_started

        if self.settings.has_reference:
            root = Path(self.config.rootpath) / self.settings.golden_dir
            mark_run_started(root, self.settings.reference)

    def ensure_engines(self) -> None:
        """A serial run starts its engines when the first opted-in test needs one: none otherwise."""
        if self.role == "serial" and self.log_dir is None:
            self.start_engines()

    # -- collection --------------------------------------------------------------------------------

    def parametrize(self, metafunc: pytest.Metafunc) -> None:
        from pytest_slam.run.optin import parametrize

        if not self.armed:  # said once, after collection (``collected``): not a collection error
            self.not_enabled.append(metafunc.definition.nodeid)
            return
        parametrize(metafunc, self.model_names)

    @staticmethod
    def not_enabled_line(nodeids: list[str]) -> str:
        """One line for opted-in tests in a run where pytest-slam is not enabled."""
        more = len(nodeids) - 1
        others = f" (and {more} more test(s))" if more else ""
        return (
            f"pytest-slam: {nodeids[0]}{others} opts in to model swapping, but pytest-slam is not "
            "enabled for this run: add a [tool.slam] table to pyproject.toml, or pass "
            "--slm-models=smollm2-135m."
        )

    def collected(self, items: list[pytest.Item]) -> None:
        from pytest_slam.run.hypothesis_support import adjust
        from pytest_slam.run.optin import module_of

        if self.not_enabled and self.role != "worker":  # a worker's tests fail one by one
            raise pytest.UsageError(self.not_enabled_line(self.not_enabled))
        swapped = [i for i in items if self.is_swapped(i)]
        for item in swapped:
            adjust(item)
        self.coverage.update(module_of(i.nodeid) for i in swapped)
        narrowed = {
            module_of(a.replace(str(self.config.rootpath) + "/", ""))
            for a in self.config.args
            if "::" in a
        }
        self.coverage -= narrowed

    def deselected(self, items: list[pytest.Item]) -> None:
        from pytest_slam.run.optin import module_of

        self.partial.update(module_of(i.nodeid) for i in items)
        self.deselected_count += len(items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # xdist's controller hears of its workers' failed collections too
            self.collect_errors += 1

    def partial_reason(
        self, session: pytest.Session, deselected: int = 0, selection: bool = True
    ) -> str | None:
        """Why this run did not run every collected test to its end (None: it did).

        A partial run cannot tell an entry no test asks for from one whose test never ran, so it
        may call nothing stale. ``deselected``: what xdist workers deselected (they report it).
        ``selection=False``: whether the run's own selection (-k, node ids: a shard) ran to its end.
        """
        status = session.exitstatus
        stopped = session.shouldfail or session.shouldstop
        dsession = self.config.pluginmanager.get_plugin("dsession")
        stopped = stopped or getattr(dsession, "shouldstop", False)
        lost = self.workers_lost
        engines = sorted(self.engine_errors)
        deselected += self.deselected_count
        node_ids = [a for a in self.config.args if "::" in a] if selection else []
        deselected = deselected if selection else 0
        missing = session.testscollected - len(self.finished)
        reasons = (
            (status == pytest.ExitCode.INTERRUPTED, "the run was interrupted"),
            (status == pytest.ExitCode.INTERNAL_ERROR, "pytest stopped on an internal error"),
            (status == pytest.ExitCode.USAGE_ERROR, "pytest stopped on a usage error"),
            (bool(stopped), f"the run stopped early ({stopped})"),
            (self.collect_errors > 0, f"{self.collect_errors} collection error(s)"),
            (lost > 0, f"{lost} xdist worker(s) lost, with the entries their tests asked for"),
            (bool(engines), f"the engine of {', '.join(engines)} did not start"),
            (deselected > 0, f"{deselected} test(s) deselected (-k, -m, --deselect, --lf)"),
            (bool(node_ids), f"narrowed to node ids ({', '.join(node_ids)})"),
            (missing > 0, f"{missing} of {session.testscollected} collected tests did not finish"),
        )
        return next((why for cond, why in reasons if cond), None)

    def is_swapped(self, item: pytest.Item) -> bool:
        callspec = getattr(item, "callspec", None)
        return callspec is not None and "slm_model" in callspec.params and self.armed

    # -- one test ------------------------------------------------------------------------------------

    def enter_test(self, item: pytest.Item, name: str | None) -> Generator[SlamModel, None, None]:
        """Fixture body: make this test's calls go to model ``name`` and record them."""
        from pytest_slam.run.fixtures import SlamModel
        from pytest_slam.run.optin import base_test_id, mark_problem, module_of
        from pytest_slam.swap.egress import watch_test
        from pytest_slam.swap.router import TestContext

        router, proxy = self.router, self.proxy
        if not self.armed:  # under xdist: each worker's test says it in one line
            pytest.fail(self.not_enabled_line([item.nodeid]), pytrace=False)
        if name is None or router is None or proxy is None:
            raise pytest.UsageError(
                f"pytest-slam: {item.nodeid} uses slm_model outside a model run"
            )
        problem = mark_problem(item)
        if problem:
            pytest.fail(problem, pytrace=False)
        block = bool(getattr(self.config.option, "slm_block_network", False))
        watch_test(router, item.nodeid, block)  # what leaves the machine: egress.py
        self.ensure_engines()
        if name in self.engine_errors:
            pytest.fail(self.engine_errors[name], pytrace=False)
        ctx = TestContext(
            item.nodeid, base_test_id(item.nodeid, name), module_of(item.nodeid), self.specs[name]
        )
        item.stash[CTX] = ctx
        router.active = ctx
        rule = self._redirect(proxy)
        try:
            yield SlamModel(self.specs[name], proxy.url_for(f"m/{name}"), ctx)
        finally:
            router.active = None
            from pytest_slam.swap import redirect

            redirect.uninstall(rule)

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
                item.stash[VERDICT] = checker.run(item, ctx, failed=True)
            raise
        if ctx is not None:
            ctx.settle()
        if ctx is None or checker is None:
            return result
        verdict = item.stash[VERDICT] = checker.run(item, ctx, failed=False)
        if verdict.problems:
            pytest.fail(
                f"pytest-slam ({ctx.model.name}):\n  " + "\n  ".join(verdict.problems),
                pytrace=False,
            )
        return result

    def annotate(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """Attach this test's Outcome to its report: reports are what xdist carries home."""
        if not self.is_swapped(item) or (report.when != "call" and report.passed):
            return
        if report.when == "teardown" and not report.failed:
            return
        from pytest_slam.report.junit_props import attach as attach_junit_properties
        from pytest_slam.run.outcomes import build_outcome, cut_message, one_line_failure

        ctx = item.stash.get(CTX, None)
        outcome = build_outcome(item, report, ctx, item.stash.get(VERDICT, None))
        # An extra attribute, as pytest's own ``TestReport(**extra)`` sets them: xdist ships it.
        vars(report)["slam"] = outcome
        attach_junit_properties(item, report, outcome)
        line = one_line_failure(ctx, report)
        if line:
            report.longrepr = line
        cut = cut_message(ctx)
        if cut:  # named on the test it cut, under its failure or with -rP, not only in the summary
            report.sections.append(("pytest-slam", cut))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from pytest_slam.run.outcomes import keep_final

        payload = getattr(report, "slam", None)
        if payload is not None and self.role != "worker":
            keep_final(self.outcomes, payload, report)  # one final outcome per test per model
        if report.failed or report.skipped:
            self.failed_tests.add(report.nodeid)
        if report.when == "teardown":
            self.finished.add(report.nodeid)

    # -- the end ---------------------------------------------------------------------------------------

    def session_finish(self, session: pytest.Session, exitstatus: int) -> int:
        from pytest_slam.run.finish import finish

        for host in sorted(self.redirected):  # one line per host: xdist's workers agree on it
            self.summary.append(
                f"calls to {host} were swapped too (redirected at the HTTP transport; "
                "[tool.slam] redirect_hosts lists more hosts)"
            )
        if self.router is not None:  # replicas that refused connections (swap/fleet.py)
            self.summary.extend(self.router.replica_lines())
        if self.role != "worker":
            self.summary.extend(cap_lines(self.outcomes))
            from pytest_slam.run.checks import diverged_lines

            self.summary.extend(diverged_lines(self.outcomes))
            if self.settings.golden_dir_legacy:
                from pytest_slam.settings import MOVE_GOLDENS

                self.summary.append(MOVE_GOLDENS)
        return finish(self, session, exitstatus)

    def summary_lines(self) -> list[str]:
        return list(self.summary)

    def engine_outcomes(self) -> list[dict[str, Any]]:
        """Each engine's cold first call, as an outcome of its own that the percentiles leave out."""
        from pytest_slam.records import Outcome

        out = []
        for start in self.engine_starts:
            if start.cold_call is not None:
                out.append(
                    Outcome(
                        nodeid=f"(engine start: {start.model})",
                        test="(engine start)",
                        model=start.model,
                        outcome="engine",
                        duration_s=start.start_s or 0.0,
                        calls=[start.cold_call],
                    ).as_dict()
                )
        return out

    def session_budget_breaches(self, verdict: Verdict) -> list[str]:
        """``[tool.slam.budget]`` checked against each model's flat aggregate of its calls."""
        from pytest_slam.report.budgets import session_budget_breaches

        return session_budget_breaches(
            self.settings.budget, list(self.specs), self.outcomes, verdict
        )


def cap_lines(outcomes: list[dict[str, Any]]) -> list[str]:
    """The summary's word on answers the generation cap cut (chat.generation_cap), if any."""
    from pytest_slam.run.outcomes import CAP_OPTION

    cut = [o["nodeid"] for o in outcomes if any(c.get("cut_by_cap") for c in o.get("calls", ()))]
    if not cut:
        return []
    shown = ", ".join(cut[:3]) + (f" and {len(cut) - 3} more" if len(cut) > 3 else "")
    return [
        f"generation cap: the answers of {len(cut)} test(s) were cut at the output limit "
        f"pytest-slam set for calls without max_tokens ({shown}); set max_tokens in the request, "
        f"or raise [tool.slam] cap_factor / cap_margin or {CAP_OPTION}"
    ]


def build(config: pytest.Config, settings: Settings, armed: bool) -> SlamSession:
    """Resolve every model spec up front, so a typo fails at the door as a usage error."""
    names = settings.models or [model_specs.DEFAULT_MODEL]
    specs = {s.name: s for s in model_specs.resolve_all(names, settings.model_table)}
    if settings.max_tokens_cap is not None:  # one line for every model, the embedded one included
        for spec in specs.values():
            spec.max_tokens_cap = settings.max_tokens_cap
    session = SlamSession(config, settings, specs, armed, role=process_role(config))
    if settings.has_reference:
        session.reference_spec = model_specs.resolve(settings.reference, settings.model_table)
    if settings.judge:
        session.judge_spec = model_specs.resolve(settings.judge, settings.model_table)
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

    cli = options.overrides(config.option)
    # every key checked, here, once; the project root decides the golden folder's old default
    settings = from_table(read_table(_pyproject(config)), cli, root=Path(config.rootpath))
    ini_paths = config.getini("slm_paths")
    armed = settings.configured or "candidates" in cli or bool(ini_paths)
    session = build(config, settings, armed)
    session.opt_in_paths = [Path(p).resolve() for p in ini_paths] + [
        (Path(config.rootpath) / p).resolve() for p in settings.paths
    ]
    session.started = utc_now()
    session.prepare()
    return session


def _pyproject(config: pytest.Config) -> Path | None:
    inipath = getattr(config, "inipath", None)
    if inipath is not None and Path(inipath).name == "pyproject.toml":
        return Path(inipath)
    candidate = Path(config.rootpath) / "pyproject.toml"
    return candidate if candidate.is_file() else None
