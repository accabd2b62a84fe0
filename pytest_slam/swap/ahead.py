"""Answers fetched ahead of the tests: the candidate asked, concurrently, what the goldens say the
tests will ask it, so pytest's one-test-at-a-time loop no longer feeds a candidate one request at a
time.

The run hands over, in test order, each selected test's requests whose body does not depend on an
earlier answer (``Planned``). Each candidate has worker threads that send them within its limit
(limits.py) and within a window of the tests about to run, so memory stays flat however long the
suite. A test's own call is answered from a fetched call only when it is the very request that was
sent: the same golden key, the same test and the same upstream body (model, cap and seed included);
the fetched stream is relayed to the caller as the candidate sent it, and the call's record keeps
the timings measured when it was fetched, with the number of calls in flight then. Anything else is
asked live, and a request still queued when its test asks for it is taken off the queue and asked
live: the candidate is never asked one request twice. A fetched answer no test claims is counted
as "fetched, unused" and never paired. ``FetchQueue`` is that machinery for any model: a refresh's
reference answers use it too (golden/prefetch.py).
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from pytest_slam.errors import SlamError
from pytest_slam.records import ModelSpec
from pytest_slam.swap import upstream
from pytest_slam.swap.cache import AnswerCache
from pytest_slam.swap.chat import (
    FLIGHT_LABEL,
    ChatResult,
    Target,
    caller_left,
    pin_seed,
    stream_events,
    upstream_body,
)
from pytest_slam.swap.limits import Limiter
from pytest_slam.swap.proxy import RouteError
from pytest_slam.swap.upstream import JSONObject

WINDOW_PER_PLACE = 4  # fetched or in flight, unclaimed, per place under a candidate's limit
MIN_WINDOW = 16


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
    sent: JSONObject = field(default_factory=dict)  # the upstream body, as the live call's
    state: str = "queued"  # queued | sending | done | claimed | dropped
    # its send began (a place under the limit taken): a claim waits for it from then on; before,
    # its test takes it and asks live, as a live call that never waits for a place would
    admitted: bool = False
    result: ChatResult | None = None
    failure: Exception | None = None  # the call failed as a live one would (raised on claim)
    payloads: list[tuple[bytes, bool]] = field(default_factory=list)  # (SSE data, has choices)
    in_flight: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    # what a follower needs of the test to act on the answer (the run's judge pair, its plan)
    context: object | None = None

    def __post_init__(self) -> None:
        self.claimant = self.claimant or self.nodeid

    @property
    def answered(self) -> bool:
        """The model was asked and the call ended (an answer, or a failure its caller gets)."""
        return self.result is not None or self.failure is not None


class Follower(Protocol):
    """What acts on a fetched answer before its test runs (the run's judge, judge_ahead.py)."""

    def fetched(self, planned: Planned) -> None:
        """An answer came (called from a fetching thread: must not block)."""
        ...

    def passed(self, order: int) -> None: ...

    def close(self) -> None: ...

    def lines(self) -> list[str]: ...


Forward = Callable[[Target, JSONObject, Callable[[bytes], None], int | None], ChatResult]


class FetchQueue:
    """One model's planned requests, the threads that fetch them within its limit and a window of
    the tests about to run, and their claims: what a candidate's answers (``CandidateQueue``) and a
    refresh's reference answers (golden/prefetch.py) share. A subclass says what is sent
    (``sent_body``) and how one is fetched (``_fetch``, ending in ``_finish``)."""

    def __init__(self, name: str, limiter: Limiter) -> None:
        self.name, self.limiter = name, limiter
        self.window = max(MIN_WINDOW, WINDOW_PER_PLACE * limiter.ceiling)
        self.queue: collections.deque[Planned] = collections.deque()  # to send, in test order
        self.held: collections.deque[Planned] = collections.deque()  # every one not yet passed
        self.outstanding: list[Planned] = []  # sending or done, not yet claimed or passed
        self.by_test: dict[tuple[str, str], collections.deque[Planned]] = {}
        self.fetched = self.used = self.unused = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pools: list[upstream.Pool] = []
        self.follower: Follower | None = None  # told of each answer fetched for a waiting test

    def sent_body(self, planned: Planned) -> JSONObject:
        """The body sent upstream for it, as the live call would send it (what a claim matches)."""
        raise NotImplementedError

    def _fetch(self, planned: Planned) -> None:
        """Ask it (ending in ``_finish``)."""
        raise NotImplementedError

    def add(self, planned: Planned) -> None:
        planned.sent = self.sent_body(planned)
        with self._cond:
            self.queue.append(planned)
            self.held.append(planned)
            where = (planned.claimant, planned.key)
            self.by_test.setdefault(where, collections.deque()).append(planned)
            self._cond.notify_all()
        self._start()

    def _start(self) -> None:
        if self._threads:
            return
        for i in range(self.limiter.ceiling):
            thread = threading.Thread(
                target=self._work, name=f"slam-ahead-{self.name}-{i}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _next(self) -> Planned | None:
        """The next request to send: the first still queued, once the window has room."""
        with self._cond:
            while not self._stop.is_set():
                while self.queue and self.queue[0].state != "queued":
                    self.queue.popleft()  # claimed by its test, or passed, before it was sent
                if self.queue and len(self.outstanding) < self.window:
                    planned = self.queue.popleft()
                    planned.state = "sending"
                    self.outstanding.append(planned)
                    return planned
                self._cond.wait(timeout=0.5)
            return None

    def _admit(self, planned: Planned) -> bool:
        """Its send begins (its place under the limit taken); False when its test claimed it while
        it waited for that place: the test asks it live, so it is not sent (never asked twice)."""
        with self._cond:
            if planned.state == "claimed":
                return False
            planned.admitted = True
            return True

    def _work(self) -> None:
        with self._cond:
            self._pools.append(upstream.thread_pool())  # what close() ends mid-answer
        while True:
            planned = self._next()
            if planned is None:
                return
            try:
                self._fetch(planned)
            except Exception as exc:  # a fault of ours, not the model's: its test asks it live
                self._finish(planned, None, [], 0, repr(exc))

    def _finish(
        self,
        planned: Planned,
        result: ChatResult | None,
        payloads: list[tuple[bytes, bool]],
        in_flight: int,
        error: str | None = None,
        failure: Exception | None = None,
    ) -> None:
        """It ended: ``result``, or ``failure`` (the call failed as a live one would: raised to
        its claimant), or neither (not asked: its test asks live); set under the lock a claim and
        a move of the run read them under."""
        with self._cond:
            planned.result, planned.payloads, planned.in_flight = result, payloads, in_flight
            if failure is not None:
                planned.failure = failure
            if not planned.answered:  # not a call of the model's: its test asks it live
                planned.state = "dropped" if planned.state != "claimed" else "claimed"
            elif planned.state == "sending":
                planned.state = "done"
            if planned.answered:
                self.fetched += 1
                if planned.state == "dropped":  # its test had passed meanwhile
                    self.unused += 1
                elif planned.state == "claimed":  # its test was waiting for it
                    self.used += 1
            if planned.state in ("dropped", "claimed") and planned in self.outstanding:
                self.outstanding.remove(planned)
            if error is not None:
                planned.payloads = []
            planned.done.set()
            self._cond.notify_all()
            follow = (  # only an answer: nothing to judge in a 500, a timeout or a cut call
                result is not None
                and result.call.ok
                and error is None
                and planned.state in ("done", "claimed")
            )
        if follow and self.follower is not None:
            self.follower.fetched(planned)

    def claim(self, claimant: str, key: str, sent: JSONObject) -> Planned | None:
        """The fetched call for this request of ``claimant`` (its test, or its module), when it is
        the one sent; a queued one is taken off the queue (asked live) and None returned."""
        with self._cond:
            waiting = self.by_test.get((claimant, key))
            if not waiting:
                return None
            planned = next((p for p in waiting if p.sent == sent), None)
            if planned is None:
                return None
            waiting.remove(planned)
            if not waiting:  # memory stays flat however many tests the run has
                del self.by_test[(claimant, key)]
            state, planned.state = planned.state, "claimed"
            if planned in self.outstanding:
                self.outstanding.remove(planned)
            self._cond.notify_all()
            if state in ("queued", "dropped") or (state == "sending" and not planned.admitted):
                return None  # not sent (waiting for a place is no send): asked live
            if state == "done" and planned.answered:
                self.used += 1
            return planned

    def passed(self, order: int) -> None:
        """The run moved to the test at ``order``: what earlier tests never claimed is let go
        (counted unused if it was fetched), which frees its place in the window."""
        with self._cond:
            while self.held and self.held[0].order < order:
                planned = self.held.popleft()
                if planned.state == "queued":
                    planned.state = "dropped"
                elif planned in self.outstanding:
                    self._let_go(planned)
                waiting = self.by_test.get((planned.claimant, planned.key))
                if waiting is not None and planned in waiting:
                    waiting.remove(planned)
                    if not waiting:
                        del self.by_test[(planned.claimant, planned.key)]
            self._cond.notify_all()

    def _let_go(self, planned: Planned) -> None:
        if planned.state == "done" and planned.answered:
            self.unused += 1
        planned.state = "dropped"
        self.outstanding.remove(planned)
        planned.result, planned.payloads, planned.failure = None, [], None

    def close(self) -> None:
        """The end of the run (or an interrupt): no more sends; unclaimed answers are unused."""
        self._stop.set()
        with self._cond:
            for pool in self._pools:
                upstream.shut_down(pool)
            for planned in list(self.outstanding):
                self._let_go(planned)
            self.queue.clear()
            self.held.clear()
            self.by_test.clear()
            self._cond.notify_all()

    def line(self, label: str) -> str | None:
        """The summary's line, when anything was fetched ahead."""
        if not self.fetched:
            return None
        unused = f"; {self.unused} fetched, unused" if self.unused else ""
        return (
            f"{label}: {self.fetched} call(s) fetched ahead, {self.used} used{unused} "
            f"(up to {self.limiter.peak} at once, concurrency {self.limiter.limit})"
        )


class CandidateQueue(FetchQueue):
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

    def sent_body(self, planned: Planned) -> JSONObject:
        # which server sends it is no part of the body: no replica is picked for it
        return pin_seed(upstream_body(planned.body, self.spec, planned.cap), "candidate")

    def _fetch(self, planned: Planned) -> None:
        """Send it under the limit (limits.py: a 429 lowers it and asks again), every chunk kept
        for whichever caller claims it. Stream and usage are asked so that any caller can be
        served; the body sent is the same (``upstream_body`` sets both whatever it is given)."""
        if self.cache is not None and self.cache.has(self.spec, planned.sent):
            self._finish(planned, None, [], 0, "kept from an earlier run")  # its test reads it
            return
        kept: list[tuple[bytes, bool]] = []
        body = {**planned.body, "stream": True, "stream_options": {"include_usage": True}}

        def send() -> ChatResult:
            if not planned.admitted and not self._admit(planned):
                raise _Claimed  # its place is given back by the limiter; its test asks live
            kept.clear()
            return self._forward(
                self._target(self.spec), body, lambda p: kept.append(_kept(p)), planned.cap
            )

        token = FLIGHT_LABEL.set(f"fetched ahead for {planned.nodeid}")
        try:
            result, in_flight = self.limiter.send(send, self._stop)
        except _Claimed:
            self._finish(planned, None, [], 0)
            return
        except Exception as exc:  # a fault of the swap, not the candidate's: asked live instead
            self._finish(planned, None, [], 0, repr(exc))
            return
        finally:
            FLIGHT_LABEL.reset(token)
        if result is not None and self.cache is not None:
            self.cache.put(self.spec, planned.sent, result)
        self._finish(planned, result, kept, in_flight, None if result else "stopped")


class _Claimed(SlamError, kind="swap"):
    """Its test claimed it while it waited for a place under the limit: not sent."""


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
        self.attached: dict[str, FetchQueue] = {}  # by the summary's label, claimed elsewhere
        self.closed = False
        self.follower: Follower | None = None

    def follow(self, follower: Follower) -> None:
        """``follower`` is told of every answer fetched from now on, and of the run's moves."""
        self.follower = follower
        for queue in self.queues.values():
            queue.follower = follower

    def attach(self, label: str, queue: FetchQueue) -> None:
        """Another model's queue, claimed by its own caller (golden/prefetch.py)."""
        self.attached[label] = queue

    def every(self) -> dict[str, FetchQueue]:
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

    def lines(self) -> list[str]:
        """The summary's line per queue that had answers fetched ahead, and where an attached
        queue's server refused calls, how its limit adapted (the candidates' are the router's)."""
        out = [line for name, q in self.every().items() if (line := q.line(name)) is not None]
        out += [line for q in self.attached.values() if (line := q.limiter.line())]
        return out + (self.follower.lines() if self.follower is not None else [])


def replayed(planned: Planned) -> ChatResult:
    """The fetched call as its test's own, marked as fetched with the calls in flight then."""
    result = planned.result
    assert result is not None  # claimed entries without a result are asked live
    result.call.fetched_ahead = True
    result.call.in_flight = planned.in_flight
    return result


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


def waited(planned: Planned, deadline: float | None) -> bool:
    """Wait for a claimed call still in flight, no longer than the caller would (its timeout)."""
    if deadline is None:
        planned.done.wait()
        return True
    return planned.done.wait(timeout=max(deadline - time.perf_counter(), 0.0))
