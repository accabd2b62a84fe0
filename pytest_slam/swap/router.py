"""The swap router: which model answers a call, and the record of every call a test made.

One router per test process. The running test sets ``active``; calls arriving at the proxy while a test
is active go to that test's candidate and are recorded on it: every one, answered or failed. A call
is in flight from when it is sent to when it ends; one still in flight when the test ends (its
caller gave up, or never waited) is recorded then as a failed call (``TestContext.settle``). Calls
outside an opted-in test go to the upstream the product had configured, unchanged (the plugin
changes nothing outside opted-in tests): with the caller's own headers, so the environment's key
goes only where the caller itself sent it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pytest_slam.records import Call, ModelSpec
from pytest_slam.swap.chat import (
    ChatResult,
    Relay,
    Target,
    caller_left,
    forward_chat,
    generation_cap,
    new_call,
    runaway,
)
from pytest_slam.swap.choices import forward_candidate
from pytest_slam.swap.fleet import Replicas
from pytest_slam.swap.models import OPENAI_URL, api_key
from pytest_slam.swap.proxy import RouteError
from pytest_slam.swap.upstream import JSONObject

ReferenceChat = Callable[["TestContext | None", JSONObject, "Relay | None"], ChatResult]
# The reference's recorded completion tokens for a request (its golden answer), or None; in a
# record run it records the reference's answer first (ReferenceService.reference_first).
# Each golden step gets the request's golden key too (None: not computed, it computes it).
ReferenceTokens = Callable[["TestContext", JSONObject, "str | None"], "int | None"]
# In replay, (key, message) when a request has no golden answer at call ``turn`` of the test, else
# None (ReferenceService.miss_before): such a call is refused before the candidate is asked.
GoldenMiss = Callable[["TestContext", JSONObject, int, "str | None"], "tuple[str, str] | None"]
# A request's golden key (golden.keys.request_key): computed once per candidate call, handed to the
# golden steps above and kept on the call's record for its pairing (``Call.request_key``).
GoldenKey = Callable[[JSONObject], str]
SETTLE_S = 0.5  # at a test's end, how long a call still in flight may take to end on its own


class Meter(Protocol):
    """GPU energy of a call (``metrics.metering.EnergyMeter``, a layer above: set by the session)."""

    def metered(self, spec: ModelSpec, chat: Callable[[], ChatResult]) -> ChatResult: ...


class Embedder(Protocol):
    """Answers embeddings calls (``golden.embeddings.EmbeddingsService``, set by the session)."""

    def serve(
        self, ctx: TestContext | None, body: JSONObject, headers: list[tuple[str, str]]
    ) -> tuple[int, bytes]: ...


@dataclass
class Flight:
    """A candidate call sent and not yet ended: what its record says if it never ends in time."""

    call: Call  # model, endpoint, request and start, as forward_chat records them
    start: float  # time.perf_counter()
    abandoned: bool = False  # recorded at the test's end: its own end comes too late

    def unended(self) -> Call:
        """The call as the test's end finds it: a failed call, with the time it had taken."""
        call = self.call
        caller_left(call)
        call.error = f"{call.error}: it was still in flight when the test ended"
        call.e2e_ms = (time.perf_counter() - self.start) * 1000.0
        return call


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
    flights: list[Flight] = field(default_factory=list)  # candidate calls in flight
    elsewhere: int = 0  # chat calls made during the test on another model's route
    paired: bool = True  # its calls are paired with golden answers (not slm(reference=False))
    engine_error: str | None = None  # its model's engine did not start at the test's first call
    # calls refused in replay for want of a golden answer, the candidate never asked:
    # (call number, golden key, the message with the command that records it)
    misses: list[tuple[int, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._ended = threading.Condition(self.lock)

    def add(self, call: Call) -> None:
        with self.lock:
            (self.calls if call.role == "candidate" else self.reference_calls).append(call)

    def begin(self, target: Target, body: JSONObject, key: str | None = None) -> Flight:
        """A candidate call is sent: in flight until ``end``, or until the test's end."""
        call = new_call(target, body, request_key=key)
        flight = Flight(call, time.perf_counter())
        with self.lock:
            self.flights.append(flight)
        return flight

    def end(self, flight: Flight, call: Call) -> None:
        """The call ended, answered or failed: recorded, unless the test's end recorded it."""
        with self._ended:
            if flight.abandoned:
                return
            self.flights.remove(flight)
            if call.request_key is None and call.request is flight.call.request:
                call.request_key = flight.call.request_key  # forward_chat's own record
            self.calls.append(call)
            self._ended.notify_all()

    def settle(self, wait_s: float = SETTLE_S) -> None:
        """At the end of the test (or of a ``--slm-repeat`` run), before its outcome is built:
        calls still in flight get ``wait_s`` to end; any left are recorded now as failed calls
        (the caller gave up on them, or never waited), so no call goes unaccounted for."""
        with self._ended:
            self._ended.wait_for(lambda: not self.flights, timeout=wait_s)
            for flight in self.flights:
                flight.abandoned = True
                self.calls.append(flight.unended())
            self.flights.clear()


@dataclass
class Upstream:
    """Where the product's calls went before the plugin pointed OPENAI_BASE_URL at the proxy.

    No key: a passthrough call carries the caller's own Authorization, never one the plugin adds.
    """

    base_url: str = OPENAI_URL

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Upstream:
        return cls(env.get("OPENAI_BASE_URL") or OPENAI_URL)


class SwapRouter:
    """Implements proxy.Router for one test process."""

    def __init__(self, models: dict[str, ModelSpec], original: Upstream) -> None:
        self.models = models
        self.original = original
        self.active: TestContext | None = None
        self.reference: ReferenceChat | None = None
        self.engine_errors: dict[str, str] = {}
        self.meter: Meter | None = None
        self.reference_tokens: ReferenceTokens | None = None  # for the generation cap
        self.golden_miss: GoldenMiss | None = None  # replay: a miss is found before the call
        self.golden_key: GoldenKey | None = None  # set with the two above: a paired run's key
        # starts the run's engines (once), called by a test's first model call: a test that makes
        # none (or only embeddings calls) starts no engine
        self.starter: Callable[[], None] | None = None
        self.cap_factor, self.cap_margin = 2.0, 64  # [tool.slam] cap_factor, cap_margin
        self.embedder: Embedder | None = None
        self.unswapped = 0  # requests passed through to the original endpoint, outside any test
        self._fleets: dict[tuple[str, tuple[str, ...]], Replicas] = {}
        self._lock = threading.Lock()

    def target(self, route: str) -> Target:
        if route == "ref":
            raise RouteError(404, "pytest-slam: the reference serves chat completions only")
        spec = self._spec(route)
        if spec is not None and not spec.base_urls and self.starter is not None:
            self.starter()  # a call this model serves: its engine starts now
        if spec is None:
            with self._lock:
                self.unswapped += 1
            return Target(
                _passthrough_spec(self.original), self.original.base_url, None, role="passthrough"
            )
        replicas = self._replicas(spec)
        url = replicas.pick() if replicas is not None else spec.base_urls[0]
        return Target(spec, url, api_key(spec), replicas=replicas)

    def _spec(self, route: str) -> ModelSpec | None:
        if route.startswith("m/"):
            name = route[2:]
            if name not in self.models:
                raise RouteError(404, f"pytest-slam: model {name!r} is not selected in this run")
            return self.models[name]
        if route:
            raise RouteError(404, f"pytest-slam: unknown route {route!r}")
        return self.active.model if self.active is not None else None

    def _replicas(self, spec: ModelSpec) -> Replicas | None:
        """A model's replicas (fleet.py: in turn, a refusing one stepped around), or None for a
        model with one endpoint; why a model has no server to call is a 503."""
        if spec.name in self.engine_errors:
            if self.active is not None and self.active.model.name == spec.name:
                self.active.engine_error = self.engine_errors[spec.name]  # the test's failure
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

    def swapping(self, route: str) -> bool:
        """Whether a chat call on this route is swapped (and recorded) or passed through untouched."""
        return bool(route) or self.active is not None

    def serves_responses(self, route: str) -> bool:
        """Whether this route's model serves ``/v1/responses`` itself (``responses = true``):
        then a Responses call goes to it as is, else it is translated to a chat call."""
        spec = None if route == "ref" else self._spec(route)
        return spec is not None and spec.responses

    def chat(
        self,
        route: str,
        body: JSONObject,
        relay: Relay | None,
        gone: Callable[[], bool] | None = None,
    ) -> ChatResult:
        """Answer one chat call; ``gone`` says whether its caller left before the answer went out
        (then the call was no answer to it: ``caller_left``)."""
        ctx = self.active
        if ctx is not None and self.starter is not None:
            self.starter()
        if route == "ref":
            if self.reference is None:
                raise RouteError(404, "pytest-slam: no reference model is configured")
            return self.reference(ctx, body, relay)
        target = self.target(route)
        key = self._golden_key(ctx, target, body)
        tokens = self.reference_length(ctx, target, body, key)
        cap = None
        if target.role == "candidate":
            cap = generation_cap(body, target.spec, tokens, self.cap_factor, self.cap_margin)
        # Only the running test's own candidate gives it evidence: a call on another model's route
        # (a client kept from that model's test) is answered, never counted for this one.
        own = ctx is not None and target.role == "candidate" and target.spec.name == ctx.model.name
        if ctx is not None and own:
            self._refuse_a_miss(ctx, body, key)
        flight = ctx.begin(target, body, key) if ctx is not None and own else None
        if ctx is not None and not own:
            with ctx.lock:
                ctx.elsewhere += 1
        try:
            forward = forward_candidate if target.role == "candidate" else forward_chat
            if self.meter is None:
                result = forward(target, body, relay, cap=cap)
            else:  # GPU energy of calls to GPU-served models (metering.EnergyMeter)
                result = self.meter.metered(
                    target.spec, lambda: forward(target, body, relay, cap=cap)
                )
        except BaseException as exc:  # an interrupt, or a fault of the swap: still a failed call
            if ctx is not None and flight is not None:
                flight.call.error = f"the swap proxy's call broke off ({exc!r})"
                flight.call.error_kind = "fault"
                ctx.end(flight, flight.call)
            raise
        if target.role == "candidate" and runaway(result.call, body, target.spec, tokens):
            result.status = 502  # the product gets the reason, not a JSON object cut short
        if gone is not None and result.call.error_kind != "timeout" and gone():
            caller_left(result.call)  # it gave up first: the product never saw this answer
        if ctx is not None and flight is not None:
            ctx.end(flight, result.call)
        return result

    def _golden_key(self, ctx: TestContext | None, target: Target, body: JSONObject) -> str | None:
        """The request's golden key, once, for a candidate call of a test paired with goldens;
        None where no golden step runs, or for a request it cannot key (each step then says why,
        as without it)."""
        if self.golden_key is None or ctx is None or not ctx.paired or target.role != "candidate":
            return None
        try:
            return self.golden_key(body)
        except ValueError:
            return None

    def _refuse_a_miss(self, ctx: TestContext, body: JSONObject, key: str | None = None) -> None:
        """In replay, a request with no golden answer cannot be compared, whatever the candidate
        answers: refused now (404 with the command that records it), the candidate never asked."""
        if self.golden_miss is None or not ctx.paired:
            return
        with ctx.lock:
            turn = len(ctx.calls) + len(ctx.flights) + 1
        miss = self.golden_miss(ctx, body, turn, key)
        if miss is None:
            return
        with ctx.lock:
            ctx.misses.append((turn, *miss))
        raise RouteError(404, f"pytest-slam: {miss[1]}")

    def reference_length(
        self, ctx: TestContext | None, target: Target, body: JSONObject, key: str | None = None
    ) -> int | None:
        """The reference's completion tokens for this request, the base of a candidate call's
        generation cap (chat.generation_cap), or None (no golden answer, not a candidate call)."""
        if target.role != "candidate" or ctx is None or self.reference_tokens is None:
            return None
        return self.reference_tokens(ctx, body, key)

    def embeddings(
        self, route: str, body: JSONObject, headers: list[tuple[str, str]]
    ) -> tuple[int, bytes]:
        """An embeddings call while swapping: never to the chat candidate (embeddings.py)."""
        if route == "ref" or self.embedder is None:
            raise RouteError(404, "pytest-slam: this route does not serve embeddings")
        self._spec(route)  # an unknown route is refused as for any other call
        return self.embedder.serve(self.active, body, headers)


def _passthrough_spec(original: Upstream) -> ModelSpec:
    return ModelSpec(
        name="(not swapped)", provider="openai", model_id="", base_urls=[original.base_url]
    )
