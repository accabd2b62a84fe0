"""The run's swap, wired: each part is built with its collaborators, and nothing is set on it after.

Read top to bottom, ``build_swap`` is how a call reaches the golden store: the reference service
(golden/reference.py) is the router's ``GoldenSide`` (swap/router.py); the targets start the
engines (run/start/engine_start.py) at the first call; the limiters, the answers fetched ahead and the
answer cache are the router's and the fetcher's alike; the proxy serves the router, and
``OPENAI_BASE_URL`` names the proxy until ``stop``. Imported only where the swap arms
(run/start/startup.py): a run that opts nothing in loads no golden store and starts no proxy.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_slam.golden.embeddings import EmbeddingsService
from pytest_slam.golden.redact import scrub
from pytest_slam.golden.reference import ReferenceService
from pytest_slam.golden.store import GoldenStore
from pytest_slam.metrics.metering import EnergyMeter
from pytest_slam.records import ModelSpec
from pytest_slam.run.score.verdict import CTX
from pytest_slam.run.wired.fixtures import ReferenceClient
from pytest_slam.settings import Settings
from pytest_slam.swap import models as model_specs
from pytest_slam.swap import redirect
from pytest_slam.swap.ahead import Ahead
from pytest_slam.swap.cache import FOLDER, AnswerCache
from pytest_slam.swap.limits import Limiter, Sample
from pytest_slam.swap.proxy import SwapProxy
from pytest_slam.swap.router import SwapRouter, Upstream, candidate_forward
from pytest_slam.swap.targets import Targets
from pytest_slam.util.files import scratch_folder

Say = Callable[[str], None]


@dataclass(frozen=True)
class Golden:
    """The reference's side of the run: its golden store and the service that answers from it."""

    store: GoldenStore
    service: ReferenceService


@dataclass(frozen=True)
class Swap:
    """One test process's swap, built whole by ``build_swap``."""

    router: SwapRouter
    proxy: SwapProxy
    golden: Golden | None
    ahead: Ahead  # the router's only when it fetches ahead (``build_swap``); closed at the end
    cache: AnswerCache | None  # candidates' answers kept between runs, opt-in
    limiters: dict[str, Limiter]
    redirect_hosts: tuple[str, ...]  # swap/redirect.py's defaults and [tool.slam] redirect_hosts
    redirected: set[str] = field(default_factory=set)  # hosts whose calls redirect.py swapped
    saved_env: dict[str, str | None] = field(default_factory=dict)  # restored by ``stop``

    @property
    def reference(self) -> ReferenceService | None:
        return self.golden.service if self.golden is not None else None

    @property
    def store(self) -> GoldenStore | None:
        return self.golden.store if self.golden is not None else None

    def redirect(self) -> redirect.Redirect:
        """For one test: clients that ignore OPENAI_BASE_URL (``AzureOpenAI``, an explicit
        ``base_url`` on a listed host) reach the proxy too (redirect.py). Only during opted-in
        tests, so the plugin changes nothing elsewhere and a caller's key never travels on."""
        proxy = self.proxy
        return redirect.install(
            lambda: proxy.base_url,
            self.redirect_hosts,
            lambda r: self.redirected.add(r.original_url.split("/")[2]),
            server=proxy,
        )

    def reference_client(self, item: pytest.Item) -> ReferenceClient | None:
        reference = self.reference
        if reference is None:
            return None
        return ReferenceClient(self.proxy.url_for("ref"), item.stash[CTX], reference)

    def point_env(self) -> None:
        """The product's clients find the proxy through the environment (a placeholder key where
        none is set: the openai client refuses to start without one)."""
        self._set_env("OPENAI_BASE_URL", self.proxy.base_url)
        if not os.environ.get("OPENAI_API_KEY"):
            self._set_env("OPENAI_API_KEY", model_specs.PLACEHOLDER_KEY)

    def _set_env(self, name: str, value: str) -> None:
        self.saved_env.setdefault(name, os.environ.get(name))
        os.environ[name] = value

    def stop(self) -> None:
        """The environment as it was, the proxy stopped (once)."""
        if not self.saved_env:
            return
        for name, value in self.saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.saved_env.clear()
        self.proxy.stop()


@dataclass(frozen=True)
class SwapInputs:
    """What the swap is built from: the run's settings and models, and the parts below it."""

    settings: Settings
    specs: dict[str, ModelSpec]
    golden_root: Path
    targets: Targets
    reference_spec: ModelSpec | None = None
    embeddings_spec: ModelSpec | None = None
    energy: EnergyMeter | None = None
    say: Say | None = None
    record_args: str = ""  # so the printed record command selects the same models
    run: str | None = None  # xdist's id of the run, shared by its workers (the answer cache's)


def build_swap(inputs: SwapInputs) -> Swap:
    """The golden side, limits, answers fetched ahead, router and proxy, each handed its
    collaborators as it is built; then the environment points at the proxy."""
    settings = inputs.settings
    golden = golden_side(inputs)
    reference = golden.service if golden is not None else None
    original = Upstream.from_env(dict(os.environ))
    sample = Sample(inputs.settings.alone_first, inputs.settings.alone_every)
    limits = limiters(inputs.specs, inputs.say, sample)
    cache = answer_cache(settings, inputs.golden_root, inputs.run)
    # a run none of whose models a GPU serves meters no call: none is handed to the calls
    energy = inputs.energy if inputs.energy is not None and inputs.energy.gpu is not None else None
    ahead = Ahead(limits, inputs.targets.candidate, candidate_forward(energy), cache)
    router = SwapRouter(
        inputs.specs,
        original,
        targets=inputs.targets,
        golden=reference,
        meter=energy,
        embedder=EmbeddingsService(original.base_url, inputs.embeddings_spec, reference),
        # a refresh (--slm-record=all) re-records each reference answer before the candidate is
        # asked, so the cap a fetched request carried may no longer be the call's: the candidate
        # would be asked twice; it is asked live instead (the reference's answers are fetched
        # ahead in a refresh: golden/prefetch.py)
        ahead=ahead if reference is not None and settings.record != "all" else None,
        limiters=limits,
        cache=cache,
        cap=(settings.cap_factor, settings.cap_margin),
        recording=_recorded_only(inputs),
    )
    if reference is not None and reference.ahead is not None:  # a refresh: closed and counted
        # with the candidates' (its own recordings claim them)
        ahead.attach(f"{reference.spec.name} (reference)", reference.ahead)
    hosts = (*redirect.DEFAULT_HOSTS, *settings.redirect_hosts)
    swap = Swap(router, SwapProxy(router).start(), golden, ahead, cache, limits, hosts)
    swap.point_env()
    return swap


def _recorded_only(inputs: SwapInputs) -> ModelSpec | None:
    """The reference when the run's tests run on it (a recording run asked for no candidate:
    run/start/startup.py resolve_models), else None."""
    spec = inputs.reference_spec
    return spec if spec is not None and inputs.specs.get(spec.name) is spec else None


def golden_side(inputs: SwapInputs) -> Golden | None:
    """The golden store and the reference service over it, when the project has a reference."""
    settings, spec = inputs.settings, inputs.reference_spec
    if not settings.has_reference or spec is None:
        return None
    store = GoldenStore(inputs.golden_root, settings.reference)
    service = ReferenceService(
        spec,
        store,
        settings.record,
        settings.samples,
        settings.reference_retries,
        settings.reference_timeout_s,
        record_args=inputs.record_args,
        # a refresh fetches within it (golden/prefetch.py)
        limiter=Limiter.of(spec, inputs.say),
    )
    return Golden(store, service)


def limiters(
    specs: dict[str, ModelSpec], say: Say | None, sample: Sample | None = None
) -> dict[str, Limiter]:
    """Each candidate's calls in flight under its concurrency, with the calls it sends alone
    (swap/limits.py)."""
    return {name: Limiter.of(spec, say, sample) for name, spec in specs.items()}


def answer_cache(settings: Settings, golden_root: Path, run: str | None) -> AnswerCache | None:
    """The candidates' kept answers, when the project opted in (swap/cache.py), scrubbed as the
    golden files are."""
    if not settings.cache:
        return None
    return AnswerCache(scratch_folder(golden_root) / FOLDER, scrub, settings.cache_ttl_s, run)
