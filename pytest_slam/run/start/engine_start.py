"""The run's managed engines: which to start, starting them (once), their cold first call, stopping.

A serial run starts them at a test's first model call (the router asks, through ``ensure``); xdist's
controller starts them before its workers exist and hands the workers their URLs
(``worker_input``), so a worker never starts one.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pytest

from pytest_slam.records import Call, ModelSpec
from pytest_slam.settings import Settings
from pytest_slam.swap import models as model_specs
from pytest_slam.swap.chat import Target, forward_chat
from pytest_slam.swap.engines import EngineError, Running, needs_engine, start_engine
from pytest_slam.util.foreign import tmp_path_factory

if TYPE_CHECKING:
    from pytest_slam.run.end.summary import Summary
    from pytest_slam.run.start.progress import Progress

MAX_SLOTS = 256  # an engine's parallel slots, however many processes and calls in flight
WARMUP = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4, "temperature": 0}


class WorkerInput(TypedDict):
    """What a worker needs to use the controller's engines (plain data: xdist ships it)."""

    endpoints: dict[str, list[str]]  # model name -> its engine's base URLs
    engine_errors: dict[str, str]  # model name -> why its engine did not start


def worker_input(specs: list[ModelSpec | None], errors: dict[str, str]) -> WorkerInput:
    return {
        "endpoints": {s.name: s.base_urls for s in specs if s is not None},
        "engine_errors": dict(errors),
    }


def apply_worker_input(
    data: WorkerInput, specs: list[ModelSpec | None], errors: dict[str, str]
) -> None:
    """On a worker, before its swap is built: the controller's engines' URLs and failures."""
    for spec in specs:
        if spec is not None and data["endpoints"].get(spec.name):
            spec.base_urls = list(data["endpoints"][spec.name])
    errors.update(data["engine_errors"])


@dataclass
class EngineStart:
    """What starting one engine took, and its first (cold) call, kept out of the percentiles."""

    model: str
    start_s: float | None
    cold_call: Call | None = None
    error: str | None = None


@dataclass(eq=False)
class Engines:
    """One process's engines (serial or xdist controller); ``errors`` is the run's dict of
    engines that did not start, shared with the swap's targets."""

    config: pytest.Config
    settings: Settings
    role: str
    candidates: list[ModelSpec]
    summary: Summary
    errors: dict[str, str]
    reference_spec: ModelSpec | None = None
    judge_spec: ModelSpec | None = None
    progress: Progress | None = None
    running: list[Running] = field(default_factory=list)
    starts: list[EngineStart] = field(default_factory=list)
    # a serial run's engines start at a test's first model call, from the proxy's threads: once
    starting: threading.Lock = field(default_factory=threading.Lock)
    checked: bool = False  # start ran: what the run needs is started (or failed)
    log_dir: Path | None = None  # the engines' logs, made when the run starts an engine

    def wanted(self) -> list[ModelSpec]:
        """Local models whose engine this run must start: candidates, plus a local reference/judge."""
        wanted = list(self.candidates)
        if self.reference_spec is not None and self.settings.record != "none":
            wanted.append(self.reference_spec)
        if self.judge_spec is not None and all(s is not self.judge_spec for s in wanted):
            wanted.append(self.judge_spec)  # a judge that is also a candidate shares its engine
        return [spec for spec in wanted if needs_engine(spec)]

    def start(self) -> None:
        """Start every local engine, one slot per xdist worker; logs go under pytest's basetemp,
        so its retention removes them (``-p no:tmpdir``: the system temp dir). A run with no
        local engine makes no log folder."""
        self.checked = True
        specs = self.wanted()
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
            # a slot for every call in flight: each test process's limit (swap/limits.py), a
            # judge's and a reference's too (a run's judge pairs and a refresh are asked ahead)
            slots = min(processes * (spec.concurrency or 1), MAX_SLOTS)
            try:
                server = start_engine(
                    spec, self.log_dir, self.settings.engine_timeout_s, slots, say, beat_s
                )
            except (EngineError, model_specs.ModelSpecError) as exc:
                self.errors[spec.name] = str(exc)
                self.starts.append(EngineStart(spec.name, None, error=str(exc)))
                continue
            self.running.append(server)
            self.summary.append(server.start_line())
            self.starts.append(EngineStart(spec.name, server.started_s, self._warm(spec)))

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

    def ensure(self) -> None:
        """A serial run starts its engines at the first model call of an opted-in test (the
        router asks, swap/targets.py ``starter``): a run whose tests make none, or only
        embeddings calls, starts nothing."""
        if self.role != "serial" or self.checked:
            return
        with self.starting:
            if not self.checked:
                self.start()

    def stop(self) -> None:
        for server in self.running:
            server.stop()
        self.running.clear()
