"""The swap router: which model answers a call, and the record of every call a test made.

One router per test process. The running test sets ``active``; calls arriving at the proxy while a test
is active go to that test's candidate and are recorded on it. Calls outside an opted-in test go to the
upstream the product had configured, unchanged (the plugin changes nothing outside opted-in tests).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .chat import ChatResult, Relay, Target, forward_chat
from .models import OPENAI_URL, api_key
from .proxy import RouteError
from .records import Call, ModelSpec

ReferenceChat = Callable[["TestContext | None", dict[str, Any], "Relay | None"], ChatResult]


@dataclass
class TestContext:
    """The opted-in test that is running now, and what its model calls produced."""

    __test__ = False  # not a test class, whatever pytest's collector thinks of the name

    nodeid: str
    test: str
    module: str
    model: ModelSpec
    calls: list[Call] = field(default_factory=list)
    reference_calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, call: Call) -> None:
        with self.lock:
            (self.calls if call.role == "candidate" else self.reference_calls).append(call)


@dataclass
class Upstream:
    """What the product had configured before the plugin pointed OPENAI_BASE_URL at the proxy."""

    base_url: str = OPENAI_URL
    api_key: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Upstream:
        return cls(env.get("OPENAI_BASE_URL") or OPENAI_URL, env.get("OPENAI_API_KEY"))


class SwapRouter:
    """Implements proxy.Router for one test process."""

    def __init__(self, models: dict[str, ModelSpec], original: Upstream) -> None:
        self.models = models
        self.original = original
        self.active: TestContext | None = None
        self.reference: ReferenceChat | None = None
        self.engine_errors: dict[str, str] = {}
        self.meter: Any = None  # metering.EnergyMeter, set by the session
        self._turns: dict[str, itertools.cycle[str]] = {}
        self._lock = threading.Lock()

    def target(self, route: str) -> Target:
        if route == "ref":
            raise RouteError(404, "pytest-slam: the reference serves chat completions only")
        spec = self._spec(route)
        if spec is None:
            return Target(
                _passthrough_spec(self.original),
                self.original.base_url,
                self.original.api_key,
                role="passthrough",
            )
        return Target(spec, self._replica(spec), api_key(spec))

    def _spec(self, route: str) -> ModelSpec | None:
        if route.startswith("m/"):
            name = route[2:]
            if name not in self.models:
                raise RouteError(404, f"pytest-slam: model {name!r} is not selected in this run")
            return self.models[name]
        if route:
            raise RouteError(404, f"pytest-slam: unknown route {route!r}")
        return self.active.model if self.active is not None else None

    def _replica(self, spec: ModelSpec) -> str:
        """Spread calls over a model's replicas in turn (a fleet with no load balancer)."""
        if spec.name in self.engine_errors:
            raise RouteError(503, self.engine_errors[spec.name])
        if not spec.base_urls:
            raise RouteError(503, f"pytest-slam: model {spec.name!r} has no running server")
        if len(spec.base_urls) == 1:
            return spec.base_urls[0]
        with self._lock:
            turn = self._turns.setdefault(spec.name, itertools.cycle(spec.base_urls))
            return next(turn)

    def swapping(self, route: str) -> bool:
        """Whether a chat call on this route is swapped (and recorded) or passed through untouched."""
        return bool(route) or self.active is not None

    def chat(self, route: str, body: dict[str, Any], relay: Relay | None) -> ChatResult:
        ctx = self.active
        if route == "ref":
            if self.reference is None:
                raise RouteError(404, "pytest-slam: no reference model is configured")
            return self.reference(ctx, body, relay)
        target = self.target(route)
        if self.meter is None:
            result = forward_chat(target, body, relay)
        else:  # GPU energy of calls to GPU-served models (metering.EnergyMeter)
            result = self.meter.metered(target.spec, lambda: forward_chat(target, body, relay))
        if ctx is not None and result.call.role == "candidate":
            ctx.add(result.call)
        return result


def _passthrough_spec(original: Upstream) -> ModelSpec:
    return ModelSpec(
        name="(not swapped)", provider="openai", model_id="", base_urls=[original.base_url]
    )
