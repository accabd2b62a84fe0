"""The swap router: which model answers a call, and the record of every call a test made.

One router per test process. The running test is ``active``; calls arriving at the proxy while a test
is active go to that test's candidate and are recorded on it: every one, answered or failed. A call
is in flight from when it is sent to when it ends; one still in flight when the test ends (its
caller gave up, or never waited) is recorded then as a failed call (``TestContext.settle``). Calls
outside an opted-in test go to the upstream the product had configured, unchanged (the plugin
changes nothing outside opted-in tests): with the caller's own headers, so the environment's key
goes only where the caller itself sent it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from pytest_slam.records import Call, ModelSpec, in_ms
from pytest_slam.swap.ahead import Ahead, Planned, relayed, replayed
from pytest_slam.swap.broker import patience, waited
from pytest_slam.swap.cache import AnswerCache
from pytest_slam.swap.chat import (
    CALLER_DEADLINE,
    SERVED_DEADLINE,
    ChatResult,
    Deadline,
    Relay,
    Target,
    caller_left,
    forward_chat,
    generation_cap,
    new_call,
    runaway,
)
from pytest_slam.swap.choices import forward_candidate
from pytest_slam.swap.limits import Limiter
from pytest_slam.swap.models import OPENAI_URL
from pytest_slam.swap.proxy import RouteError
from pytest_slam.swap.request import Request, build
from pytest_slam.swap.targets import Targets
from pytest_slam.swap.upstream import JSONObject, timeout_for

SETTLE_S = 0.5  # at a test's end, how long a call still in flight may take to end on its own


class GoldenSide(Protocol):
    """The golden store's side of a candidate call (``golden.reference.ReferenceService``, a layer
    above): the request's key, the reference's answer length for the cap (recorded first in a
    record run), a replay miss found before the candidate is asked, and the reference route."""

    def key(self, body: JSONObject) -> str: ...

    def reused(self) -> tuple[int, float] | None: ...

    def reference_first(
        self, ctx: TestContext, body: JSONObject, key: str | None
    ) -> int | None: ...

    def miss_before(
        self,
        ctx: TestContext,
        body: JSONObject,
        turn: int,
        key: str | None,
        follows: int | None = ...,
    ) -> tuple[str, str] | None: ...

    def chat(
        self, ctx: TestContext | None, body: JSONObject, relay: Relay | None, role: str = ...
    ) -> ChatResult: ...


class Meter(Protocol):
    """GPU energy of a call (``metrics.metering.EnergyMeter``, a layer above: run/wired/wiring.py)."""

    def metered(self, spec: ModelSpec, chat: Callable[[], ChatResult]) -> ChatResult: ...


class Embedder(Protocol):
    """Answers embeddings calls (``golden.embeddings.EmbeddingsService``, run/wired/wiring.py)."""

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
        call.e2e_ms = in_ms(time.perf_counter() - self.start)
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

    def raised(self, exc: BaseException) -> None:
        """The test ended on ``exc``: when it is a timeout of the product's client or framework,
        the last candidate call it waited on is one its caller gave up on (``framework_gave_up``:
        a runaway answer it never read is not the candidate's runaway)."""
        from pytest_slam.swap.chat import framework_gave_up, raised_timeout

        raised = raised_timeout(exc)
        with self.lock:
            last = self.calls[-1] if self.calls else None
        if raised is not None and last is not None:
            framework_gave_up(last, raised)

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


@dataclass
class Prepared:
    """A chat call made ready to forward: who asked, where it goes, its golden key and its cap,
    and for a candidate the request built once from them (what is sent, claimed and kept)."""

    ctx: TestContext | None
    target: Target
    body: JSONObject
    own: bool  # the running test's own candidate: its evidence (else only answered)
    key: str | None = None  # the request's golden key (a paired test's candidate call)
    tokens: int | None = None  # the reference's completion tokens for it, the cap's base
    request: Request | None = None  # a candidate's, built in ``prepare``

    @property
    def candidate(self) -> bool:
        return self.target.role == "candidate"


Forward = Callable[[Target, Request, "Relay | None"], ChatResult]


def candidate_forward(meter: Meter | None) -> Forward:
    """How a candidate is asked, live or ahead: ``n`` > 1 split where the engine lacks it, and
    GPU energy metered where a GPU serves it (no ``meter``: no model of the run is)."""
    if meter is None:
        return forward_candidate

    def forward(target: Target, request: Request, relay: Relay | None) -> ChatResult:
        assert meter is not None
        return meter.metered(target.spec, lambda: forward_candidate(target, request, relay))

    return forward


class SwapRouter:
    """Implements proxy.Router for one test process: each chat call is prepared (target, golden
    key, cap, a replay miss refused), forwarded (from an answer fetched ahead when it is the very
    request that was sent, else live) and accounted (runaway, a caller that left, the test's
    record), by the same steps whichever way it was answered."""

    def __init__(
        self,
        models: dict[str, ModelSpec],
        original: Upstream,
        *,
        targets: Targets | None = None,
        golden: GoldenSide | None = None,
        meter: Meter | None = None,
        embedder: Embedder | None = None,
        ahead: Ahead | None = None,
        limiters: dict[str, Limiter] | None = None,
        cache: AnswerCache | None = None,
        cap: tuple[float, int] = (2.0, 64),  # [tool.slam] cap_factor, cap_margin
        recording: ModelSpec | None = None,
    ) -> None:
        self.models = models
        # the reference, in a run that records it only: its tests' calls are the golden side's
        self.recording = recording
        self.original = original
        self.active: TestContext | None = None
        self.targets = targets or Targets()
        self.golden = golden
        self.embedder = embedder
        self.ahead = ahead
        self.limiters = limiters or {}
        self.cache = cache
        self.cap_factor, self.cap_margin = cap
        self._forward = candidate_forward(meter)
        self.unswapped = 0  # requests passed through to the original endpoint, outside any test
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def running(self, ctx: TestContext) -> Iterator[None]:
        """``ctx`` is the running test (``active``) until the block ends: calls without a route
        of their own go to its candidate and are recorded on it."""
        self.active = ctx
        try:
            yield
        finally:
            self.active = None

    def target(self, route: str) -> Target:
        if route == "ref":
            raise RouteError(404, "pytest-slam: the reference serves chat completions only")
        spec = self._spec(route)
        if spec is None:
            with self._lock:
                self.unswapped += 1
            return Target(
                _passthrough_spec(self.original), self.original.base_url, None, role="passthrough"
            )
        try:
            return self.targets.candidate(spec)
        except RouteError:
            error = self.targets.engine_errors.get(spec.name)
            if error is not None and self.active is not None and self.active.model is spec:
                self.active.engine_error = error  # the test's failure
            raise

    def _spec(self, route: str) -> ModelSpec | None:
        if route.startswith("m/"):
            name = route[2:]
            if name not in self.models:
                raise RouteError(404, f"pytest-slam: model {name!r} is not selected in this run")
            return self.models[name]
        if route:
            raise RouteError(404, f"pytest-slam: unknown route {route!r}")
        return self.active.model if self.active is not None else None

    def replica_lines(self) -> list[str]:
        return self.targets.replica_lines()

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
        if ctx is not None:
            self.targets.start()
        if route == "ref":
            if self.golden is None:
                raise RouteError(404, "pytest-slam: no reference model is configured")
            return self.golden.chat(ctx, body, relay)
        if self.golden is not None and self._recorded_only(route):
            return self.golden.chat(ctx, body, relay, role="candidate")
        call = self.prepare(ctx, route, body)
        flight = call.ctx.begin(call.target, body, call.key) if call.ctx and call.own else None
        try:
            result = self.forward(call, relay)
        except BaseException as exc:  # an interrupt, or a fault of the swap: still a failed call
            if call.ctx is not None and flight is not None:
                flight.call.error = f"the swap proxy's call broke off ({exc!r})"
                flight.call.error_kind = "fault"
                call.ctx.end(flight, flight.call)
            raise
        return self.account(call, flight, result, gone)

    def _recorded_only(self, route: str) -> bool:
        """A call of a test that runs on the reference in a run recording it only: answered (and
        recorded) by the golden side, once, as the test's own call (so it is paired and shown)."""
        return (
            self.recording is not None
            and self.active is not None
            and (self._spec(route) is self.recording)
        )

    # -- prepare -----------------------------------------------------------------------------

    def prepare(self, ctx: TestContext | None, route: str, body: JSONObject) -> Prepared:
        """Where the call goes, its golden key and cap; a replay miss is refused here (404)."""
        target = self.target(route)
        # Only the running test's own candidate gives it evidence: a call on another model's route
        # (a client kept from that model's test) is answered, never counted for this one.
        own = ctx is not None and target.role == "candidate" and target.spec.name == ctx.model.name
        call = Prepared(ctx, target, body, own)
        if not call.candidate:
            return call
        if ctx is not None:
            call.key = self._golden_key(ctx, body)
            if self.golden is not None:
                call.tokens = self.golden.reference_first(ctx, body, call.key)
        cap = generation_cap(body, target.spec, call.tokens, self.cap_factor, self.cap_margin)
        call.request = build(body, target.spec, target.role, cap, call.key)
        if ctx is not None and own:
            self._refuse_a_miss(ctx, body, call.key)
        elif ctx is not None:
            with ctx.lock:
                ctx.elsewhere += 1
        return call

    def _golden_key(self, ctx: TestContext, body: JSONObject) -> str | None:
        """The request's golden key, once, for a candidate call of a test paired with goldens;
        None where no golden step runs, or for a request it cannot key (each step then says why,
        as without it)."""
        if self.golden is None or not ctx.paired:
            return None
        try:
            return self.golden.key(body)
        except ValueError:
            return None

    def _refuse_a_miss(self, ctx: TestContext, body: JSONObject, key: str | None = None) -> None:
        """In replay, a request with no golden answer cannot be compared, whatever the candidate
        answers: refused now (404 with the command that records it), the candidate never asked."""
        if self.golden is None or not ctx.paired:
            return
        with ctx.lock:
            turn = len(ctx.calls) + len(ctx.flights) + 1
            earlier = list(ctx.calls)
        follows = holds_an_answer_of(body, earlier)
        miss = self.golden.miss_before(ctx, body, turn, key, follows)
        if miss is None:
            return
        with ctx.lock:
            ctx.misses.append((turn, *miss))
        raise RouteError(404, f"pytest-slam: {miss[1]}")

    # -- forward -----------------------------------------------------------------------------

    def forward(self, call: Prepared, relay: Relay | None) -> ChatResult:
        """The one place an answer not asked now plugs in: sent ahead for this very request, or
        kept from an earlier run (the opt-in cache; what is kept is not fetched again); else it
        is asked live."""
        if call.request is None:
            return forward_chat(call.target, call.body, relay)
        spec, sent = call.target.spec, call.request.sent
        result = self._fetched(call, sent, relay)
        if result is not None:
            return result
        kept = self.cache.get(spec, sent) if self.cache is not None else None
        if kept is not None:
            return self._not_asked_now(call, kept, [], relay)
        result = self._live(call, relay)
        if self.cache is not None:
            self.cache.put(spec, sent, result)
        return result

    def _fetched(self, call: Prepared, sent: JSONObject, relay: Relay | None) -> ChatResult | None:
        """This call answered from the call sent ahead for it, or None (ask it live); a caller
        whose own timeout ends first (waiting, or before the fetched answer had ended) left."""
        planned = self._claimed(call, sent)
        if planned is None:
            return None
        limit, job = CALLER_DEADLINE.get(), planned.job
        assert job is not None  # a claimed request was queued
        if not waited(job, limit.at if limit else None, patience(timeout_for(call.target.spec))):
            return self._too_late(call, limit, kept=False)
        if planned.result is None:  # the fetch broke off in the swap itself: asked live
            return None
        return self._not_asked_now(call, replayed(planned), planned.ended.payloads, relay)

    def _not_asked_now(
        self,
        call: Prepared,
        result: ChatResult,
        payloads: list[tuple[bytes, bool]],
        relay: Relay | None,
    ) -> ChatResult:
        """An answer fetched ahead or kept, served as a live one would be, unless it took longer
        than the caller's own timeout: a live call would have ended without it, so nothing of it
        reaches the caller and the call is the candidate's failure."""
        limit = CALLER_DEADLINE.get() or SERVED_DEADLINE.get()
        took = result.call.ttft_ms if call.body.get("stream") else result.call.e2e_ms
        if limit is not None and took is not None and took > limit.timeout_s * 1000.0:
            return self._too_late(call, limit, kept=result.call.cached)
        return self._as_asked(call, result, payloads, relay)

    def _claimed(self, call: Prepared, sent: JSONObject) -> Planned | None:
        """The fetched call for this test's own request, when it is the very one sent."""
        if self.ahead is None or not call.own or call.ctx is None or call.key is None:
            return None
        return self.ahead.claim(call.target.spec.name, call.ctx.nodeid, call.key, sent)

    def _as_asked(
        self,
        call: Prepared,
        result: ChatResult,
        payloads: list[tuple[bytes, bool]],
        relay: Relay | None,
    ) -> ChatResult:
        """An answer not asked now, served to this caller as a live one would be: its stream
        relayed (as the candidate sent it, or rebuilt from the completion), on its record the
        product's own request."""
        options = call.body.get("stream_options")
        usage = isinstance(options, dict) and bool(options.get("include_usage"))
        relayed(result, payloads, relay, usage)
        result.call.request = call.body  # the product's own request, as a live call keeps it
        result.call.streamed = bool(call.body.get("stream"))
        result.call.request_key = call.key
        return result

    def _too_late(self, call: Prepared, limit: Deadline | None, *, kept: bool) -> ChatResult:
        """The caller's own timeout ended before the fetched (or ``kept``) answer did: no
        answer to it."""
        record = new_call(call.target, call.body, request_key=call.key, fetched_ahead=not kept)
        record.cached = kept
        if limit is not None:
            limit.expire()
        caller_left(record, limit.timeout_s if limit is not None else None)
        return ChatResult(record, status=504)

    def _live(self, call: Prepared, relay: Relay | None) -> ChatResult:
        """Asked now, counted among the candidate's calls in flight."""
        target, request = call.target, call.request
        assert request is not None  # a candidate's, built in ``prepare``
        limiter = self.limiters.get(target.spec.name) or Limiter(target.spec.name, 1)
        limit = CALLER_DEADLINE.get()
        result, in_flight = limiter.send(
            lambda: self._forward(target, request, relay),
            deadline=None if limit is None else limit.at,
        )
        assert result is not None  # a test's own call is never stopped before it is sent
        result.call.in_flight = in_flight
        return result

    # -- account -----------------------------------------------------------------------------

    def account(
        self,
        call: Prepared,
        flight: Flight | None,
        result: ChatResult,
        gone: Callable[[], bool] | None,
    ) -> ChatResult:
        """The call's record, however it was answered: a structured answer cut at its cap is a
        runaway, an answer its caller left before is none, and the test records the call."""
        if call.candidate and runaway(result.call, call.body, call.target.spec, call.tokens):
            result.status = 502  # the product gets the reason, not a JSON object cut short
        if gone is not None and result.call.error_kind != "timeout" and gone():
            caller_left(result.call)  # it gave up first: the product never saw this answer
        if call.ctx is not None and flight is not None:
            call.ctx.end(flight, result.call)
        return result

    def embeddings(
        self, route: str, body: JSONObject, headers: list[tuple[str, str]]
    ) -> tuple[int, bytes]:
        """An embeddings call while swapping: never to the chat candidate (embeddings.py)."""
        if route == "ref" or self.embedder is None:
            raise RouteError(404, "pytest-slam: this route does not serve embeddings")
        self._spec(route)  # an unknown route is refused as for any other call
        return self.embedder.serve(self.active, body, headers)


def holds_an_answer_of(body: JSONObject, calls: list[Call]) -> int | None:
    """The number (1-based) of the first of this test's candidate ``calls`` whose answer the
    request carries as an assistant message, or None: a framework asking again after the
    candidate's answer (instructor after prose to a tool request), a conversation the reference
    never had, so it has no golden answer to find or to record."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    said = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    for number, call in enumerate(calls, start=1):
        if call.role == "candidate" and call.ok and any(_is_answer(m, call) for m in said):
            return number
    return None


def _is_answer(message: dict[str, object], call: Call) -> bool:
    """Whether an assistant message is ``call``'s answer: its text, or its tool calls' arguments."""
    text = message.get("content")
    if isinstance(text, str) and text.strip() and text.strip() == call.text.strip():
        return True
    sent = message.get("tool_calls")
    if not isinstance(sent, list) or not sent or not call.tool_calls:
        return False
    args = [(t.get("function") or {}).get("arguments") for t in sent if isinstance(t, dict)]
    answered = [(t.get("function") or t).get("arguments") for t in call.tool_calls]
    return args == answered


def _passthrough_spec(original: Upstream) -> ModelSpec:
    return ModelSpec(
        name="(not swapped)", provider="openai", model_id="", base_urls=[original.base_url]
    )
