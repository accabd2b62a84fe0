"""How many calls one server has in flight: at most its limit, the running test's call first.

A hosted API or a batching engine answers many requests at once; asking it one at a time wastes
most of its throughput. Each model gets a limit (``concurrency``), the calls at the server at once,
a test's own call included (before, a test's own call skipped it: 8 meant 9 at the server).
Where nobody set one, an endpoint's limit is found from its throughput and its refusals
(adaptive.py); a managed engine keeps its slots' count. Who gets a free place:

- **the running test's call first**: a test's own call waits only for a place, never behind a
  call fetched for a later test; on a managed engine (``reserve``) fetched calls use at most
  limit - 1, so one slot is always the running test's (8 fetched answers once filled the embedded
  engine's 8 slots and the test's own call timed out);
- **a sample sent alone** (``Sample``): the first calls and every so many, sent with nothing else
  in flight on the server (the limiter drains and holds the others), so the latency a user meets
  is measured beside the latency under the run's own load (``Call.alone``);
- **waiters woken one at a time**, each by the place it waits for (no wake-up of every thread on
  every answer); a refusal's hold (its Retry-After, within bounds) holds fetched calls back.

The limiter never writes to the terminal while it holds its lock.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_slam.records import ModelSpec
from pytest_slam.swap.adaptive import INITIAL, TOP, Probe
from pytest_slam.swap.engines import needs_engine

if TYPE_CHECKING:
    from pytest_slam.swap.chat import ChatResult

ENDPOINT_CONCURRENCY = INITIAL  # a hosted API or a server of the user's own: where it starts
# A managed engine: llama.cpp serving SmolLM2 on 2 cores answered 40 calls in 18.2 s at 1 slot,
# 18.2 s at 2, 15.1 s at 4 and 10.3 s at 8 (slots = calls in flight; bench/README.md section 25),
# so the embedded engine gets 8; vLLM batches hundreds.
ENGINE_CONCURRENCY = {"vllm": 64}
DEFAULT_ENGINE_CONCURRENCY = 8
THROTTLE_STATUSES = frozenset({429, 503})  # lower the limit (503: still the candidate's failure)
RATE_LIMITED = 429  # not the model's answer but the load this run made: asked again
THROTTLE_RETRIES = 8
BACKOFF_S = 1.0  # a refusal's hold without a usable Retry-After
MAX_HOLD_S = 30.0  # a Retry-After above it is taken for a mistake: the default backoff
# A sample a test's own call came beside is sent again (at most this often in a run): the first
# call of a run fetched ahead is the sample, and the first test's own call often came beside it,
# which left a run of 200 cases without a single lone latency (issue 49)
RESAMPLES = 3
WAIT_S = 0.5  # a waiter looks at its stop event this often (a guard, not the wake-up)


def default_concurrency(spec: ModelSpec) -> int:
    """The limit a model gets when nobody set one (an endpoint's: where it starts adapting)."""
    if needs_engine(spec):
        return ENGINE_CONCURRENCY.get(spec.provider, DEFAULT_ENGINE_CONCURRENCY)
    return ENDPOINT_CONCURRENCY


def concurrency_of(spec: ModelSpec, override: int | None, run_default: int | None) -> int:
    """``--slm-concurrency``, else the model's table, else ``[tool.slam] concurrency``, else the
    model's default."""
    for value in (override, spec.concurrency, run_default):
        if value is not None:
            return value
    return default_concurrency(spec)


def adapts(spec: ModelSpec, override: int | None, run_default: int | None) -> bool:
    """Whether the model's limit is found rather than set: an endpoint nobody gave a number."""
    explicit = (override, spec.concurrency, run_default)
    return all(value is None for value in explicit) and not needs_engine(spec)


def ceiling_of(spec: ModelSpec) -> int:
    """The most calls in flight a resolved model may reach: its concurrency, or the adaptive
    limit's top (what its limiter, its broker's window and the plan of the run are sized by)."""
    return TOP if spec.adaptive else spec.concurrency or 1


def hold_of(hold_s: float | None) -> float:
    """The hold a refusal sets: its Retry-After when it is a number of seconds in bounds, else
    the default backoff (a negative, NaN or absurd value once held nothing, or for hours)."""
    if hold_s is None or not math.isfinite(hold_s) or not 0 <= hold_s <= MAX_HOLD_S:
        return BACKOFF_S
    return hold_s


@dataclass(frozen=True)
class Sample:
    """Which calls are sent alone: the first ``first`` and every ``every``-th (0: none)."""

    first: int = 0
    every: int = 0

    def takes(self, number: int) -> bool:
        return number <= self.first or (self.every > 0 and number % self.every == 0)


@dataclass(eq=False)
class Place:
    """One call's place: the calls in flight with it, whether it is alone, the probe's round,
    when it entered."""

    in_flight: int
    alone: bool
    round: int
    start: float
    company: bool = False  # a test's own call entered while it was alone: not a lone latency
    waited: int = 0  # calls on the server that ended while it waited for this place


class Line:
    """Calls waiting for a place, in the order they enter: by ``order`` (a fetched call's test's
    place in the run), then by arrival. A conversation's next turn, foreseen once its earlier
    answer came, joins after later tests' calls already waiting and still goes first."""

    def __init__(self) -> None:
        self._waiting: list[tuple[int, int, threading.Condition]] = []
        self._arrival = itertools.count()

    def join(self, me: threading.Condition, order: int) -> None:
        bisect.insort(self._waiting, (order, next(self._arrival), me))

    def first(self) -> threading.Condition | None:
        return self._waiting[0][2] if self._waiting else None

    def leave(self, me: threading.Condition) -> None:
        self._waiting = [w for w in self._waiting if w[2] is not me]

    def __len__(self) -> int:
        return len(self._waiting)


@dataclass(eq=False)
class Limiter:
    """One server's calls in flight (a test's own and fetched ones) under its limit."""

    model: str
    ceiling: int  # the most places: the configured concurrency, or the adaptive limit's top
    say: Callable[[str], None] | None = None  # one terminal line, the first time it lowers
    adaptive: bool = False  # nobody set a number: the limit is found (adaptive.py)
    reserve: bool = False  # a managed engine: one place kept for the running test's call
    sample: Sample = field(default_factory=Sample)
    in_flight: int = 0
    peak: int = 0
    lowered: int = 0  # how often a refusal lowered the limit
    alone_sent: int = 0  # calls sent alone (the latency sample)
    ended: int = 0  # calls that left their place (what a waiter's ``Place.waited`` counts)
    hold_until: float = 0.0
    probe: Probe = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _own: Line = field(default_factory=Line)  # first come, first served
    _fetched: Line = field(default_factory=Line)  # in test order
    _granted: int = 0
    _owed: int = 0  # samples owed: sent alone, a test's own call came beside them
    _resent: int = 0
    _alone: bool = False  # a call sent alone is draining the others or in flight
    _drainer: threading.Condition | None = None
    _solo: Place | None = None  # the call sent alone, while it is in flight
    _said: bool = False
    _local: threading.local = field(default_factory=threading.local)

    def __post_init__(self) -> None:
        self.probe = Probe(self.ceiling, self.adaptive)

    @classmethod
    def of(
        cls,
        spec: ModelSpec,
        say: Callable[[str], None] | None = None,
        sample: Sample | None = None,
    ) -> Limiter:
        """The limiter of a resolved model (run/start/startup.py set its ``concurrency`` and whether
        it adapts): an adaptive one may rise to ``TOP``; an engine keeps a place for a test."""
        adaptive = bool(spec.adaptive)
        ceiling = ceiling_of(spec)
        return cls(spec.name, ceiling, say, adaptive, needs_engine(spec), sample or Sample())

    @property
    def limit(self) -> int:
        """The places now: where the probe has the limit (at most ``ceiling``)."""
        return self.probe.limit

    # -- places ------------------------------------------------------------------------------

    def acquire(self, stop: threading.Event, order: int = 0) -> int | None:
        """A place for a fetched call: waits for one (behind every test's own call, past any
        hold, and behind the fetched calls of tests before ``order``); returns the calls in
        flight with it, or None once ``stop`` is set."""
        place = self._place(False, stop, order=order)
        return None if place is None else place.in_flight

    def enter(self) -> int:
        """A test's own call: waits only for a place (first in line); the calls in flight with
        it."""
        place = self._place(True, None)
        assert place is not None  # only a stop event ends a wait
        return place.in_flight

    def _place(
        self, own: bool, stop: threading.Event | None, retry: bool = False, order: int = 0
    ) -> Place | None:
        with self._lock:
            arrived = self.ended
            queue = self._own if own else self._fetched
            me: threading.Condition | None = None
            try:
                # nobody of its kind waits and there is room: it enters at once, as it would at
                # the head of the line, with no place in it to take and give back
                if len(queue) or not self._room(own):
                    me = threading.Condition(self._lock)
                    queue.join(me, 0 if own else order)
                    while queue.first() is not me or not self._room(own):
                        if stop is not None and stop.is_set():
                            return None
                        me.wait(self._timeout(own))
                    queue.leave(me)
                alone = self.ceiling > 1 and not retry and self._sampled()
                if alone and not self._drain(me or threading.Condition(self._lock), stop):
                    return None
                return self._enter(alone, self.ended - arrived)
            finally:
                if me is not None:
                    queue.leave(me)
                self._wake()

    def _room(self, own: bool) -> bool:
        """Whether a call of this kind may enter now (the lock held). A test's own call is never
        held back for the latency sample (its caller's timeout runs): the sample then had company
        and is not counted as alone."""
        limit = self.probe.limit
        if own:
            return self.in_flight < limit
        if self._alone:
            return False
        if self._own or time.monotonic() < self.hold_until:
            return False
        kept = 1 if self.reserve and limit > 1 else 0
        return self.in_flight < limit - kept

    def _timeout(self, own: bool) -> float:
        held = self.hold_until - time.monotonic()
        return WAIT_S if own or held <= 0 else min(held, WAIT_S)

    def _sampled(self) -> bool:
        self._granted += 1
        if self._owed and self.sample.first:
            self._owed -= 1
            return True
        return self.sample.takes(self._granted)

    def _drain(self, me: threading.Condition, stop: threading.Event | None) -> bool:
        """Hold every other call back until none is in flight: this one goes alone."""
        self._alone, self._drainer = True, me
        while self.in_flight:
            if stop is not None and stop.is_set():
                self._alone, self._drainer = False, None
                return False
            me.wait(WAIT_S)
        self._drainer = None
        return True

    def _enter(self, alone: bool, waited: int = 0) -> Place:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        place = Place(self.in_flight, alone, self.probe.round, time.monotonic(), waited=waited)
        if alone:
            self._solo = place
        elif self._solo is not None:
            self._solo.company = True
        self._local.place = place
        return place

    def _wake(self) -> None:
        """Wake the one waiter a free place is for: a test's own call first (the lock held)."""
        own, fetched = self._own.first(), self._fetched.first()
        if own is not None and self._room(True):
            own.notify()
        elif self._alone:
            if self._drainer is not None and not self.in_flight:
                self._drainer.notify()
        elif fetched is not None and self._room(False):
            fetched.notify()

    def waiting(self) -> tuple[int, int]:
        """Calls waiting for a place: the tests' own, and fetched ones."""
        with self._lock:
            return len(self._own), len(self._fetched)

    def held(self) -> float:
        """Seconds a refusal still holds calls back (a test's own call retried waits them)."""
        with self._lock:
            return max(0.0, self.hold_until - time.monotonic())

    def leave(
        self,
        status: int,
        hold_s: float | None = None,
        *,
        tokens: int | None = None,
        place: Place | None = None,
    ) -> None:
        """A call ended with ``status`` (``tokens``: its answer's): a refusal lowers the limit,
        an answer tells the probe. ``place``: the one this thread entered last, by default."""
        place = place or getattr(self._local, "place", None)
        self._local.place = None
        line = None
        with self._lock:
            busy = bool(self._own or self._fetched)
            self.in_flight -= 1
            self.ended += 1
            if place is not None and place.alone:
                self._alone, self._solo = False, None
                self.alone_sent += not place.company
                if place.company and self._resent < RESAMPLES:  # the next call goes alone
                    self._owed, self._resent = self._owed + 1, self._resent + 1
                self.probe.next_round()  # the drain is no measure of the server
            if status in THROTTLE_STATUSES:
                line = self._throttle(status, hold_s)
            elif status < 400 and place is not None:
                pace = (time.monotonic() - place.start) / (tokens or 1)
                self.probe.answered(place.round, busy, pace, place.in_flight)
            self._wake()
        if line is not None and self.say is not None:
            self.say(line)  # outside the lock: a slow terminal holds no call back

    def _throttle(self, status: int, hold_s: float | None) -> str | None:
        """Lower the limit to the calls the server is still answering; a refusal under a limit
        already lowered (a rate, not a cap of calls at once) holds every fetched call back for
        the hold (the refused call itself always waits it, in ``send``). The terminal's line the
        first time (returned, said outside the lock)."""
        before, hold = self.probe.limit, hold_of(hold_s)
        if not self.probe.refused(self.in_flight, status):
            self.hold_until = max(self.hold_until, time.monotonic() + hold)
            return None
        self.lowered += 1
        if self._said:
            return None
        self._said = True
        return (
            f"{self.model} answered {status}: calls in flight lowered {before} -> "
            f"{self.probe.limit}, waiting {hold:.3g} s; the run goes on (set "
            f"[tool.slam.models.{self.model}] concurrency lower to start there)"
        )

    # -- one call ----------------------------------------------------------------------------

    def send(
        self,
        send: Callable[[], ChatResult],
        stop: threading.Event | None = None,
        deadline: float | None = None,
        order: int = 0,
    ) -> tuple[ChatResult | None, int]:
        """One call under this limit, fetched (``stop``: behind the tests' own calls and the
        fetched calls of tests before ``order``) or a test's own (first in line), the same way:
        counted in flight, marked when it went alone, and asked again after a 429 once the hold
        it set has passed (a test's own call never waits past its caller's ``deadline``, a
        perf_counter moment). Returns the result (None: stopped first) and the calls in flight
        with the try that gave it."""
        for attempt in range(THROTTLE_RETRIES + 1):
            place = self._place(stop is None, stop, attempt > 0, order)  # a retry never alone
            if place is None:
                return None, 0
            status, hold, tokens = 502, None, None
            try:
                result = send()
                status, hold = result.status, result.hold_s
                tokens = result.call.completion_tokens
            finally:
                self.leave(status, hold, tokens=tokens, place=place)
            result.call.alone = place.alone and not place.company and status < 400
            result.call.waited_for = place.waited
            if result.status != RATE_LIMITED or attempt == THROTTLE_RETRIES:
                return result, place.in_flight
            if not self._waited(hold_of(hold), stop, deadline):
                stopped = stop is not None and stop.is_set()
                return (None, 0) if stopped else (result, place.in_flight)
        raise AssertionError("unreachable")  # the loop returns on its last try

    def _waited(self, hold: float, stop: threading.Event | None, deadline: float | None) -> bool:
        """A refused call waits out its hold (and any the limiter set) before it is asked again;
        a test's own call only where its caller would not have given up first (``deadline``),
        a fetched one until ``stop``."""
        hold = max(hold, self.held())
        if stop is not None:
            return not stop.wait(hold)
        if deadline is not None and time.perf_counter() + hold >= deadline:
            return False
        time.sleep(hold)
        return True

    def line(self) -> str | None:
        """The summary's line: where the limit settled and why, when it adapted or a refusal
        lowered it; how many calls went alone."""
        if not (self.lowered or (self.adaptive and self.peak > 1)):
            return None
        probe, limit, peak = self.probe, self.probe.limit, self.peak
        if probe.settled:
            where = f"calls in flight settled at {limit} ({probe.why}); at most {peak} at once"
        elif peak < limit:
            where = f"calls in flight at most {peak}, under the limit of {limit}: never filled"
        else:
            where = f"calls in flight reached {limit}, still rising at the end ({probe.why})"
        refused = f"the server refused calls {self.lowered} time(s) (429/503); " * bool(
            self.lowered
        )
        alone = f"; {self.alone_sent} sent alone" if self.alone_sent else ""
        return f"{self.model}: {refused}{where}{alone}"
