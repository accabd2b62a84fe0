"""Where a candidate's call goes: its engine started first, one of its replicas, its key.

Shared by the router (a test's own call) and the answers fetched ahead (ahead.py), so both reach a
model the same way and a model whose engine failed refuses both with the same reason.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pytest_slam.records import ModelSpec
from pytest_slam.swap.chat import Target
from pytest_slam.swap.fleet import Replicas
from pytest_slam.swap.models import api_key
from pytest_slam.swap.proxy import RouteError


class Targets:
    """The run's candidates as call targets (one per test process)."""

    def __init__(
        self,
        engine_errors: dict[str, str] | None = None,
        starter: Callable[[], None] | None = None,
    ) -> None:
        # model name -> why its engine did not start (shared with the session, which fills it)
        self.engine_errors = engine_errors if engine_errors is not None else {}
        # starts the run's engines (once): a test that makes no model call starts none
        self.starter = starter
        self._started = False  # the starter ran and returned: a call asks it nothing more
        self._fleets: dict[tuple[str, tuple[str, ...]], Replicas] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        """The run's engines started (once: every later call of the run finds them started)."""
        if self._started or self.starter is None:
            return
        self.starter()
        self._started = True

    def candidate(self, spec: ModelSpec) -> Target:
        """``spec``'s target; RouteError 503 when it has no server to call."""
        if not spec.base_urls:
            self.start()  # a call this model serves: its engine starts now
        replicas = self.replicas(spec)
        url = replicas.pick() if replicas is not None else spec.base_urls[0]
        return Target(spec, url, api_key(spec), replicas=replicas)

    def replicas(self, spec: ModelSpec) -> Replicas | None:
        """A model's replicas (fleet.py: in turn, a refusing one stepped around), or None for a
        model with one endpoint; why a model has no server to call is a 503."""
        if spec.name in self.engine_errors:
            raise RouteError(503, self.engine_errors[spec.name])
        if not spec.base_urls:
            raise RouteError(503, f"pytest-slam: model {spec.name!r} has no running server")
        if len(spec.base_urls) == 1:
            return None
        key = (spec.name, tuple(spec.base_urls))
        with self._lock:
            fleet = self._fleets.get(key)
            if fleet is None:
                fleet = self._fleets[key] = Replicas(spec.name, key[1])
            return fleet

    def replica_lines(self) -> list[str]:
        """What this process saw of replicas that refused connections, for the run's summary."""
        with self._lock:
            fleets = list(self._fleets.values())
        return [line for fleet in fleets for line in fleet.lines()]
