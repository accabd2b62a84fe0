"""Answers fetched ahead of the tests: the candidate asked, concurrently, what the goldens say the
tests will ask it, so pytest's one-test-at-a-time loop no longer feeds a candidate one request at a
time.

The run hands over, in test order, each selected test's requests whose body does not depend on an
earlier answer (``Planned``). Each is built once (swap/request.py) and queued on its model's
broker (broker.py: one scheduler and a bounded pool of workers per server, within its limit and a
window of the tests about to run). A test's own call is answered from a fetched call only when it
is the very request that was sent: the same golden key, the same test and the same upstream body
(model, cap and seed included); the fetched stream is relayed to the caller as the candidate sent
it, and the call's record keeps the timings measured when it was fetched, with the number of calls
in flight then. Anything else is asked live, and a request not yet sent when its test asks for it
is cancelled and asked live: the candidate is never asked one request twice. A fetched answer no
test claims is counted as "fetched, unused" and never paired. ``Fetches`` is that for any model: a
refresh's reference answers use it too (golden/prefetch.py).
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

from pytest_slam.records import ModelSpec
from pytest_slam.swap.broker import Job, Server
from pytest_slam.swap.cache import AnswerCache
from pytest_slam.swap.chat import (
    FLIGHT_LABEL,
    ChatResult,
    Relay,
    Target,
    caller_left,
    stream_events,
)
from pytest_slam.swap.limits import Limiter
from pytest_slam.swap.proxy import RouteError
from pytest_slam.swap.request import Request, build
from pytest_slam.swap.upstream import JSONObject

WINDOW_PER_PLACE = 4  # fetched or in flight, unclaimed, per place under a candidate's limit
MIN_WINDOW = 16


def window_of(ceiling: int) -> int:
    """The calls a queue keeps fetched or in flight, unclaimed, for a limit of ``ceiling``: what
    the plan of the run fills (run/test/fetching.budget) and the broker bounds."""
    return max(MIN_WINDOW, WINDOW_PER_PLACE * ceiling)


@dataclass
class Fetched:
    """How a fetched request ended: ``result`` (None: not asked, its test asks live), or
    ``failure`` (the call failed as a live one would: raised to its claimant)."""

    result: ChatResult | None = None
    payloads: list[tuple[bytes, bool]] = field(default_factory=list)  # (SSE data, has choices)
    in_flight: int = 0
    failure: Exception | None = None


@dataclass(eq=False)
class Planned:
    """One request a test is expected to send its candidate (from its golden entry)."""

    nodeid: str
    model: str
    key: str
    body: JSONObject  # the request as the test sent it when it was recorded
    cap: int | None  # the generation cap the live call would get (chat.generation_cap)
    order: int  # the test's place in the run
    claimant: str = ""  # who may claim it: its test (the default), or any test of a module
    # what a follower needs of the test to act on the answer (the run's judge pair, its plan)
    context: object | None = None
    # after it answered OK: the request that follows it (a conversation's next turn), queued
    # for the same model; called on a fetching thread, outside every lock
    follow_up: Callable[[Planned], Planned | None] | None = None
    request: Request | None = None  # built once when it is queued
    job: Job[Fetched] | None = None  # its place on its server's broker

    def __post_init__(self) -> None:
        self.claimant = self.claimant or self.nodeid

    @property
    def ended(self) -> Fetched:
        """How its fetch ended; empty while not ended, cancelled, or broken by a fault of ours."""
        job = self.job
        if job is None or not job.done() or job.cancelled() or job.exception() is not None:
            return Fetched()
        return job.result()

    @property
    def sent(self) -> JSONObject:
        return self.request.sent if self.request is not None else {}

    @property
    def result(self) -> ChatResult | None:
        return self.ended.result

    @property
    def answered(self) -> bool:
        """The model was asked and the call ended (an answer, or a failure its caller gets)."""
        ended = self.ended
        return ended.result is not None or ended.failure is not None


class Follower(Protocol):
    """What acts on a fetched answer before its test runs (the run's judge, judge_ahead.py)."""

    def fetched(self, planned: Planned) -> None:
        """An answer came (called from a fetching thread: must not block)."""
        ...

    def passed(self, order: int) -> None: ...

    def close(self) -> None: ...

    def lines(self) -> list[str]: ...


class Fetches:
    """One model's planned requests on its broker, and their claims: what a candidate's answers
    (``CandidateQueue``) and a refresh's reference answers (golden/prefetch.py) share. A subclass
    says what is sent (``request_for``) and how one is fetched (``fetch``)."""

    def __init__(self, name: str, limiter: Limiter) -> None:
        self.name, self.limiter = name, limiter
        window = window_of(limiter.ceiling)
        self.server = Server(name, limiter.ceiling, window)
        self.held: collections.deque[Planned] = collections.deque()  # every one not yet passed
        self.by_test: dict[tuple[str, str], list[Planned]] = {}
        self.fetched = self.used = 0
        self.follower: Follower | None = None  # told of each answer fetched for a waiting test
        self._lock = threading.Lock()

    def request_for(self, planned: Planned) -> Request:
        """The request sent for it, as the live call would send it (what a claim matches)."""
        raise NotImplementedError

    def fetch(self, planned: Planned, job: Job[Fetched]) -> Fetched:
        """Ask it: ``job.sent()`` once its first byte is about to go."""
        raise NotImplementedError

    def add(self, planned: Planned) -> None:
        planned.request = self.request_for(planned)
        with self._lock:
            self.held.append(planned)
            self.by_test.setdefault((planned.claimant, planned.key), []).append(planned)
            job = planned.job = self.server.submit(planned.order, lambda j: self.fetch(planned, j))
        job.add_done_callback(lambda _: self._ended(planned))

    def _ended(self, planned: Planned) -> None:
        """A fetch ended (on its worker, outside every lock): counted, its follower told of an
        answer, and the request that follows it queued."""
        ended = planned.ended
        if ended.result is None and ended.failure is None:
            return
        with self._lock:
            self.fetched += 1
            # a test that took its call before the answer came asks the turn that follows itself
            unclaimed = planned in self.by_test.get((planned.claimant, planned.key), ())
        if ended.result is None or not ended.result.call.ok:
            return  # nothing to judge or follow in a 500, a timeout or a cut call
        if self.follower is not None:
            self.follower.fetched(planned)
        follow = planned.follow_up if unclaimed else None
        after = follow(planned) if follow is not None else None
        if after is not None and not self.server.stop.is_set():
            self.add(after)

    def claim(self, claimant: str, key: str, sent: JSONObject) -> Planned | None:
        """The fetched call for this request of ``claimant`` (its test, or its module), when it is
        the one sent; one not yet sent is cancelled (asked live) and None returned."""
        with self._lock:
            waiting = self.by_test.get((claimant, key), [])
            planned = next((p for p in waiting if p.sent == sent), None)
            if planned is None:
                return None
            waiting.remove(planned)
            if not waiting:  # memory stays flat however many tests the run has
                del self.by_test[(claimant, key)]
        job = planned.job
        assert job is not None  # set when it was queued
        self.server.release(job)
        if job.cancel():
            return None  # not sent (waiting for a place is no send): asked live
        job.add_done_callback(lambda _: self._used(planned))
        return planned

    def _used(self, planned: Planned) -> None:
        if planned.answered:
            with self._lock:
                self.used += 1

    def passed(self, order: int) -> None:
        """The run moved to the test at ``order``: what earlier tests never claimed is let go
        (counted unused if it was fetched), which frees its place in the window."""
        gone = []
        with self._lock:
            while self.held and self.held[0].order < order:
                planned = self.held.popleft()
                waiting = self.by_test.get((planned.claimant, planned.key))
                if waiting is not None and planned in waiting:
                    waiting.remove(planned)
                    if not waiting:
                        del self.by_test[(planned.claimant, planned.key)]
                    gone.append(planned)
        for planned in gone:
            if planned.job is not None:
                self.server.release(planned.job)
                planned.job.cancel()  # not sent yet: never sent

    @property
    def unused(self) -> int:
        return self.fetched - self.used

    def close(self) -> None:
        """The end of the run (or an interrupt): no more sends; unclaimed answers are unused."""
        self.server.close()
        with self._lock:
            self.held.clear()
            self.by_test.clear()

    def tally(self, label: str) -> FetchTally | None:
        """What the summary's line says, when anything was fetched ahead."""
        if not self.fetched:
            return None
        return FetchTally(label, self.fetched, self.used, self.limiter.peak, self.limiter.limit)

    def line(self, label: str) -> str | None:
        """The summary's line, when anything was fetched ahead."""
        tally = self.tally(label)
        return None if tally is None else tally.line()


@dataclass(frozen=True)
class FetchTally:
    """One queue's answers fetched ahead, as plain data: an xdist worker hands its own to the
    controller, which says one line for the run (``merged``), not one per worker."""

    label: str  # the model (a refresh's reference: its own label)
    fetched: int
    used: int
    peak: int  # the most in flight at once (in one process)
    limit: int  # the concurrency allowed (in one process)
    workers: int = 1  # how many processes this tally adds up

    def line(self) -> str:
        unused = self.fetched - self.used
        unused_part = f"; {unused} fetched, unused" if unused else ""
        each = f" on each of {self.workers} workers" if self.workers > 1 else ""
        return (
            f"{self.label}: {self.fetched} call(s) fetched ahead, {self.used} used{unused_part} "
            f"(up to {self.peak} at once, concurrency {self.limit}{each})"
        )

    def as_dict(self) -> dict[str, str | int]:
        return {
            "label": self.label,
            "fetched": self.fetched,
            "used": self.used,
            "peak": self.peak,
            "limit": self.limit,
            "workers": self.workers,
        }


def merged(tallies: Iterable[dict[str, str | int]]) -> list[FetchTally]:
    """The workers' tallies as one per label: calls added up; at once and the concurrency are
    each worker's own, so the most of any worker is said, with how many workers."""
    out: dict[str, FetchTally] = {}
    for data in tallies:
        try:
            one = FetchTally(
                str(data["label"]),
                *(int(data[k]) for k in ("fetched", "used", "peak", "limit", "workers")),
            )
        except (KeyError, TypeError, ValueError):  # not a tally: nothing to say of it
            continue
        was = out.get(one.label)
        out[one.label] = (
            one
            if was is None
            else FetchTally(
                one.label,
                was.fetched + one.fetched,
                was.used + one.used,
                max(was.peak, one.peak),
                max(was.limit, one.limit),
                was.workers + one.workers,
            )
        )
    return list(out.values())


Forward = Callable[[Target, Request, "Relay | None"], ChatResult]


class CandidateQueue(Fetches):
    """One candidate's planned requests: sent as its live call would be (model, cap, seed), the
    stream kept for whichever caller claims it, an answer kept in the opt-in cache."""

    def __init__(
        self,
        spec: ModelSpec,
        limiter: Limiter,
        target: Callable[[ModelSpec], Target],
        forward: Forward,
        cache: AnswerCache | None = None,
    ) -> None:
        super().__init__(spec.name, limiter)
        self.spec, self._target, self._forward, self.cache = spec, target, forward, cache

    def request_for(self, planned: Planned) -> Request:
        # which server sends it is no part of the body: no replica is picked for it
        return build(planned.body, self.spec, "candidate", planned.cap, planned.key)

    def fetch(self, planned: Planned, job: Job[Fetched]) -> Fetched:
        """Send it under the limit (limits.py: a 429 lowers it and asks again), every chunk kept
        for whichever caller claims it. Stream and usage are asked so that any caller can be
        served; the body sent is the same (``upstream_body`` sets both whatever it is given)."""
        request = planned.request
        assert request is not None  # built when it was queued
        if self.cache is not None and self.cache.has(self.spec, request.sent):
            return Fetched()  # kept from an earlier run: its test reads it
        kept: list[tuple[bytes, bool]] = []
        usage = {"stream": True, "stream_options": {"include_usage": True}}
        streamed = replace(request, body={**request.body, **usage})

        def send() -> ChatResult:
            job.sent()  # its test took it while it waited for a place: not sent, asked live
            kept.clear()
            return self._forward(self._target(self.spec), streamed, lambda p: kept.append(_kept(p)))

        token = FLIGHT_LABEL.set(f"fetched ahead for {planned.nodeid}")
        try:
            # in its test's order: a conversation's next turn, queued once its earlier answer
            # came, goes before later tests' calls waiting for a place since
            result, in_flight = self.limiter.send(send, job.stop, order=planned.order)
        finally:
            FLIGHT_LABEL.reset(token)
        if result is not None and self.cache is not None:
            self.cache.put(self.spec, request.sent, result)
        return Fetched(result, kept if result is not None else [], in_flight)


def _kept(payload: bytes) -> tuple[bytes, bool]:
    """A relayed SSE payload and whether it carries choices (a usage-only chunk goes only to a
    caller that asked for usage)."""
    try:
        return payload, bool(json.loads(payload).get("choices"))
    except (ValueError, AttributeError):
        return payload, True


class Ahead:
    """Every candidate's queue: what the router asks when a test's call arrives; and the other
    queues of the run (a refresh's reference, ``attach``), let go, closed and counted with them."""

    def __init__(
        self,
        limiters: dict[str, Limiter],
        target: Callable[[ModelSpec], Target],
        forward: Forward,
        cache: AnswerCache | None = None,
    ) -> None:
        self.limiters, self._target, self._forward = limiters, target, forward
        self.cache = cache
        self.queues: dict[str, CandidateQueue] = {}
        self.attached: dict[str, Fetches] = {}  # by the summary's label, claimed elsewhere
        self.closed = False
        self.follower: Follower | None = None

    def follow(self, follower: Follower) -> None:
        """``follower`` is told of every answer fetched from now on, and of the run's moves."""
        self.follower = follower
        for queue in self.queues.values():
            queue.follower = follower

    def attach(self, label: str, queue: Fetches) -> None:
        """Another model's queue, claimed by its own caller (golden/prefetch.py)."""
        self.attached[label] = queue

    def every(self) -> dict[str, Fetches]:
        return {**self.queues, **self.attached}

    def plan(self, spec: ModelSpec, planned: Iterable[Planned]) -> None:
        """Queue these requests of ``spec`` (in test order) to be fetched ahead."""
        limiter = self.limiters[spec.name]
        if self.closed or limiter.ceiling <= 1:  # one call at a time: nothing is sent ahead
            return
        queue = self.queues.get(spec.name)
        if queue is None:
            queue = self.queues[spec.name] = CandidateQueue(
                spec, limiter, self._target, self._forward, self.cache
            )
            queue.follower = self.follower
        try:
            self._target(spec)  # a server to ask (its engine started here in a serial run)
        except RouteError:  # none (its engine did not start): its tests say why
            return
        for one in planned:
            queue.add(one)

    def claim(self, model: str, nodeid: str, key: str | None, sent: JSONObject) -> Planned | None:
        queue = self.queues.get(model)
        if queue is None or key is None:
            return None
        return queue.claim(nodeid, key, sent)

    def passed(self, order: int) -> None:
        for queue in self.every().values():
            queue.passed(order)
        if self.follower is not None:
            self.follower.passed(order)

    def close(self) -> None:
        self.closed = True
        for queue in self.every().values():
            queue.close()
        if self.follower is not None:
            self.follower.close()

    def tallies(self) -> list[FetchTally]:
        """Each queue's count of answers fetched ahead (those that fetched any)."""
        return [t for name, q in self.every().items() if (t := q.tally(name)) is not None]

    def lines(self, counted: bool = True) -> list[str]:
        """The summary's line per queue that had answers fetched ahead (not ``counted``: left to
        the xdist controller, which adds up its workers' ``tallies``), and where an attached
        queue's server refused calls, how its limit adapted (the candidates' are the router's)."""
        out = [t.line() for t in self.tallies()] if counted else []
        out += [line for q in self.attached.values() if (line := q.limiter.line())]
        return out + (self.follower.lines() if self.follower is not None else [])


def replayed(planned: Planned) -> ChatResult:
    """The fetched call as its test's own, marked as fetched with the calls in flight then."""
    ended = planned.ended
    assert ended.result is not None  # claimed entries without a result are asked live
    ended.result.call.fetched_ahead = True
    ended.result.call.in_flight = ended.in_flight
    return ended.result


def relayed(
    result: ChatResult,
    payloads: list[tuple[bytes, bool]],
    relay: Callable[[bytes], None] | None,
    usage: bool,
) -> None:
    """An answer not asked now, to a streaming caller: its stream as the candidate sent it
    (``payloads``), or rebuilt from the completion; a caller that hung up never saw it."""
    if relay is None or not result.call.ok:
        return
    if not payloads and result.completion is not None:
        payloads = [(p, True) for p in stream_events(result.completion, usage)]
    try:
        for payload, has_choices in payloads:
            if has_choices or usage:
                relay(payload)
    except OSError:
        caller_left(result.call, stopped=True)
        result.status = 499
