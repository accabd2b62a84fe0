"""The session built at configure time, whole: settings, model specs, then (where the run is armed)
progress, the checks that fail at the door, the engines, the swap (run/wired/wiring.py), the checker and
the tests' entry, each handed what it needs, and the session last, with every part."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_slam.records import ModelSpec, utc_now
from pytest_slam.run.end.accounting import Accounting
from pytest_slam.run.end.summary import Summary
from pytest_slam.run.start.engine_start import Engines, WorkerInput, apply_worker_input
from pytest_slam.run.start.session import SlamSession
from pytest_slam.run.test.entry import TestEntry
from pytest_slam.run.test.selection import Selection
from pytest_slam.settings import Settings
from pytest_slam.swap import models as model_specs
from pytest_slam.swap.engines import needs_engine
from pytest_slam.swap.limits import adapts, concurrency_of

if TYPE_CHECKING:
    from pytest_slam.metrics.metering import EnergyMeter
    from pytest_slam.run.inputs.tables import Tables
    from pytest_slam.run.score.checks import Checker
    from pytest_slam.run.start.progress import Progress
    from pytest_slam.run.wired.wiring import Swap


def process_role(config: pytest.Config) -> str:
    """``serial`` (no xdist), xdist's ``controller`` (engines, reports) or a ``worker`` (tests)."""
    if hasattr(config, "workerinput"):
        return "worker"
    dist = getattr(config.option, "dist", "no")
    numprocesses = getattr(config.option, "numprocesses", None)
    if dist != "no" and numprocesses != 0 and not getattr(config.option, "collectonly", False):
        return "controller"
    return "serial"


@dataclass(frozen=True)
class Models:
    """The run's models, resolved up front: candidates, and the reference, judge and embeddings."""

    specs: dict[str, ModelSpec]
    reference: ModelSpec | None = None
    judge: ModelSpec | None = None
    embeddings: ModelSpec | None = None

    @property
    def everything(self) -> list[ModelSpec | None]:
        return [*self.specs.values(), self.reference, self.judge]


def resolve_models(
    config: pytest.Config, settings: Settings, armed: bool, reference_only: bool = False
) -> Models:
    """Resolve every model spec up front, so a typo fails at the door as a usage error.

    ``pytest_slam_models`` (hookspecs.py) may edit the candidate list first. A run that records
    the reference only (``options.reference_only``) runs its tests once, on the reference: no
    candidate is resolved, so none is started.
    """
    names = [] if reference_only else list(settings.models or [model_specs.DEFAULT_MODEL])
    if armed and not reference_only:
        config.hook.pytest_slam_models(config=config, models=names)
    specs = {s.name: s for s in model_specs.resolve_all(names, settings.model_table)}
    override = getattr(config.option, "slm_concurrency", None)
    for spec in specs.values():
        if settings.max_tokens_cap is not None:  # one line for every model, the embedded one too
            spec.max_tokens_cap = settings.max_tokens_cap
        # in force, kept on the spec: the report says it, a baseline too
        spec.adaptive = adapts(spec, override, settings.concurrency)
        spec.concurrency = concurrency_of(spec, override, settings.concurrency)
    reference = judge = None
    if settings.has_reference:
        reference = model_specs.resolve(settings.reference, settings.model_table)
    if settings.judge:  # a candidate's model as the judge: the same spec, so one engine
        judge = model_specs.resolve(settings.judge, settings.model_table)
        judge = specs.get(judge.name, judge)
    for other in (reference, judge):  # theirs too: a refresh and the run's judge ask ahead
        if other is not None and other.adaptive is None:  # a candidate's own: resolved above
            other.adaptive = adapts(other, override, settings.concurrency)
            other.concurrency = concurrency_of(other, override, settings.concurrency)
    if reference_only and reference is not None:
        specs = {reference.name: reference}  # the router answers it from the golden side
    models = Models(specs, reference, judge, _embeddings(settings))
    from pytest_slam.golden.redact import secret_env

    keyed = [*models.everything, models.embeddings]
    secret_env(*(spec.api_key_env for spec in keyed if spec is not None))
    return models


def _embeddings(settings: Settings) -> ModelSpec | None:
    """[tool.slam] embeddings: a running endpoint, never a model pytest-slam would start."""
    if not settings.embeddings:
        return None
    spec = model_specs.resolve(settings.embeddings, settings.model_table)
    if needs_engine(spec):
        raise model_specs.ModelSpecError(
            f"[tool.slam] embeddings = {settings.embeddings!r} is a model pytest-slam would "
            "have to start; name a running endpoint (http://HOST:PORT/v1#MODEL) or openai:MODEL."
        )
    return spec


def configure(config: pytest.Config) -> SlamSession:
    """Build the session from [tool.slam] and the command line; arm the swap where tests run."""
    from pytest_slam.project import from_table, read_table
    from pytest_slam.run.inputs import options

    table = read_table(_pyproject(config))
    cli = options.overrides(config.option, table)
    # every key checked, here, once; the project root decides the golden folder's old default
    rootpath = Path(config.rootpath)
    settings = from_table(table, cli, root=rootpath)
    armed = settings.configured or "candidates" in cli or bool(config.getini("slm_paths"))
    only = options.reference_only(config.option, settings)
    if only:  # its one row is the reference against its own answers: nothing for a gate to judge
        settings.gate, settings.baseline = {}, {}
    models = resolve_models(config, settings, armed, only)
    role = process_role(config)
    selection = _selection(config, settings, armed, role, list(models.specs))
    summary = Summary(rootpath)
    note = options.record_note(config.option)
    if note and role != "worker":
        summary.append(note)
    if only and armed and role != "worker" and models.reference is not None:
        named = settings.models or [model_specs.DEFAULT_MODEL]
        summary.append(options.reference_only_line(models.reference.name, named))
    allowed_hosts = options.allowed_hosts(config)
    started = utc_now()
    progress = open_progress(config, role) if armed else None
    errors: dict[str, str] = {}  # model name -> why its engine did not start
    candidates = [] if only else list(models.specs.values())  # the reference's own engine: below
    engines = Engines(
        config,
        settings,
        role,
        candidates,
        summary,
        errors,
        reference_spec=models.reference,
        judge_spec=models.judge,
        progress=progress,
    )
    parts = arm(config, settings, models, summary, engines) if armed else Armed()
    entry = TestEntry(
        config,
        settings,
        models.specs,
        selection,
        role,
        errors,
        allowed_hosts,
        swap=parts.swap,
        checker=parts.checker,
        ensure_engines=engines.ensure,
    )
    return SlamSession(
        config,
        settings,
        models.specs,
        selection,
        Accounting(role),
        summary,
        engines,
        entry,
        role=role,
        reference_spec=models.reference,
        judge_spec=models.judge,
        swap=parts.swap,
        checker=parts.checker,
        energy=parts.energy,
        progress=progress,
        parsed_tables=parts.tables,
        started=started,
        gpu_line=parts.energy.line if parts.energy is not None else "",
    )


def _selection(
    config: pytest.Config, settings: Settings, armed: bool, role: str, models: list[str]
) -> Selection:
    """What the run collects and swaps: the opt-in paths of the ini and of [tool.slam]."""
    rootpath = Path(config.rootpath)
    ini = [Path(p).resolve() for p in config.getini("slm_paths")]
    return Selection(
        armed,
        role,
        models,
        rootpath,
        [str(a) for a in config.args],
        opt_in_paths=ini + [(rootpath / p).resolve() for p in settings.paths],
    )


@dataclass(frozen=True)
class Armed:
    """What an armed run adds: GPU energy, and where tests run the swap and its checker."""

    energy: EnergyMeter | None = None
    swap: Swap | None = None
    checker: Checker | None = None
    tables: Tables | None = None  # parsed for the checker; the end of the run reads them too


def arm(
    config: pytest.Config, settings: Settings, models: Models, summary: Summary, engines: Engines
) -> Armed:
    """A worker learns the engines' URLs; a process that runs tests builds its swap."""
    role = engines.role
    if role != "worker":
        check_report_paths(settings)
        check_golden_store(config, settings, summary)
    if role == "worker":  # xdist sets ``workerinput`` on a worker's config only
        data: dict[str, WorkerInput] = getattr(config, "workerinput", {})
        apply_worker_input(data["slam"], models.everything, engines.errors)
    from pytest_slam.metrics.metering import EnergyMeter

    energy = EnergyMeter(models.specs.values())  # NVML for the candidates a GPU serves
    if role == "controller":
        return Armed(energy)
    from pytest_slam.run.inputs.tables import Tables
    from pytest_slam.run.wired.wiring import SwapInputs, build_swap
    from pytest_slam.swap.targets import Targets
    from pytest_slam.util.files import scratch_folder

    golden_root = Path(config.rootpath) / settings.golden_dir
    slm_models = config.option.slm_models
    say = engines.progress.say if engines.progress is not None else None
    swap = build_swap(
        SwapInputs(
            settings,
            models.specs,
            golden_root,
            # a serial run's engines start at the first call (a test's, or one fetched ahead)
            Targets(engines.errors, engines.ensure),
            models.reference,
            models.embeddings,
            energy,
            say,
            f"--slm-models={slm_models}" if slm_models else "",
            getattr(config, "workerinput", {}).get("testrunuid"),  # xdist's, for every worker
        )
    )
    tables = Tables.of(settings, scratch=scratch_folder(golden_root))
    return Armed(energy, swap, checker(settings, models, swap, tables, summary), tables)


def checker(
    settings: Settings, models: Models, swap: Swap, tables: Tables, summary: Summary
) -> Checker:
    from pytest_slam.run.score.checks import Checker
    from pytest_slam.run.score.judging import JudgeModel

    return Checker(
        swap.reference,
        dict(settings.equivalence),
        tables.prices,
        judge=JudgeModel(models.judge) if models.judge is not None else None,
        record_mode=settings.record,
        summary=summary.lines,
        scorer_timeout_s=settings.scorer_timeout_s,
        accept_uncertified_judge=settings.accept_uncertified_judge,
    )


def open_progress(config: pytest.Config, role: str) -> Progress:
    """Progress lines (run/start/progress.py): a worker's go to the controller, which prints them."""
    from pytest_slam.run.start.progress import WORKER_KEY, Progress

    progress = Progress(config, role)
    if role == "worker":
        progress.connect(getattr(config, "workerinput", {}).get(WORKER_KEY))
    config.pluginmanager.register(progress, "slam-progress")
    progress.start()
    return progress


def check_report_paths(settings: Settings) -> None:
    """A report that cannot be written is said now, not after an hour of model calls."""
    from pytest_slam.run.inputs import options

    for path, flag in ((settings.report, options.REPORT), (settings.html, options.HTML)):
        problem = options.check_writable(path, flag)
        if problem:
            raise pytest.UsageError(f"pytest-slam: {problem}")


def check_golden_store(config: pytest.Config, settings: Settings, summary: Summary) -> None:
    """No run reads a store a killed promote half changed (golden/journal.py before_a_run)."""
    if settings.has_reference and not config.option.collectonly:
        from pytest_slam.golden.journal import before_a_run
        from pytest_slam.util.files import scratch_folder

        root = Path(config.rootpath) / settings.golden_dir
        line = before_a_run(root, scratch_folder(root) / "locks", settings.record != "none")
        if line:
            summary.append(line.removeprefix("slam golden: "))


def _pyproject(config: pytest.Config) -> Path | None:
    inipath = getattr(config, "inipath", None)
    if inipath is not None and Path(inipath).name == "pyproject.toml":
        return Path(inipath)
    candidate = Path(config.rootpath) / "pyproject.toml"
    return candidate if candidate.is_file() else None
