"""One broker per server for the calls sent ahead of their callers (issue 49): a scheduler and a
bounded pool of worker threads, whatever asks (a candidate's answers fetched ahead, a refresh's
reference answers, the run's judge pairs).

Three machines did this before, each with its threads, its wait rule and a ``notify_all`` that
woke every worker on every add, claim and end. Here a server's jobs wait in one heap in test
order (the running test's own call never waits here: it is sent from its own thread at once,
under the same limiter); at most ``workers`` threads take them, started only as jobs wait for
one, and joined when the run ends. A job is a ``concurrent.futures.Future``: its claimant cancels
it, which succeeds only while it is not started (then the claimant asks live, and the job is
never sent), else waits for its result. A job starts (``Job.start``) when its first byte is about
to go, a place under the server's limit taken; one cancelled by then is dropped unsent.

One retry rule: a 429 is asked again (``limits.Limiter.send``) and a kept-alive connection the
server had closed is resent once (``upstream.forward``), never a request of a broker that closed:
its threads' connections are shut down and their pools closed, so a cut request is not sent
again. One deadline rule: every wait has a timeout (``waited``; the workers' own waits are
slices of ``TICK_S`` that see the close).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from pytest_slam.errors import SlamError
from pytest_slam.swap import upstream
from pytest_slam.swap.limits import MAX_HOLD_S, THROTTLE_RETRIES

T = TypeVar("T")
TICK_S = 0.5  # a waiting worker, or a claimant, looks at the close this often
JOIN_S = 5.0  # the close waits this long for each worker to end its job


class Cancelled(SlamError, kind="swap"):
    """Its claimant took it (or the run ended) before it was sent: not sent."""


class Job(Future[T], Generic[T]):
    """One request (or one piece of work) a server's worker does, in test order."""

    def __init__(self, order: int, work: Callable[[Job[T]], T], stop: threading.Event) -> None:
        super().__init__()
        self.order, self.work, self.stop = order, work, stop
        self.taken = self.released = False  # a worker took it; its place in the window freed

    def start(self) -> bool:
        """Its first byte is about to go: False when its claimant took it first (not sent)."""
        if self.running():
            return True
        return not self.done() and self.set_running_or_notify_cancel()

    def sent(self) -> None:
        """``start``, or ``Cancelled`` (raised inside ``Limiter.send``: its place given back)."""
        if not self.start():
            raise Cancelled("taken by its caller before it was sent")


class Server:
    """One server's jobs: the heap, the workers (at most ``workers``, one more made while more
    jobs wait than workers do, joined at ``close``) and the window (jobs taken and not yet
    released by a claim or a passed test), so the answers kept for tests not yet run stay few
    however long the suite."""

    def __init__(self, name: str, workers: int, window: int | None = None) -> None:
        self.name, self.workers = name, max(1, workers)
        self.window = window if window is not None else 1 << 30
        self.stop = threading.Event()
        self._heap: list[tuple[int, int, Job[Any]]] = []  # (order, arrival, job)
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._pools: list[tuple[threading.Thread, upstream.Pool]] = []
        self._idle = self._outstanding = 0

    def submit(self, order: int, work: Callable[[Job[T]], T]) -> Job[T]:
        """Queue ``work`` at ``order`` (lower first); cancelled at once after ``close``."""
        job: Job[T] = Job(order, work, self.stop)
        with self._cond:
            if self.stop.is_set():
                job.cancel()
                return job
            heapq.heappush(self._heap, (order, next(self._seq), job))
            if len(self._heap) > self._idle and len(self._threads) < self.workers:
                self._grow()  # more jobs wait than workers do
            self._cond.notify()  # one worker, not all of them
        return job

    def release(self, job: Job[T]) -> None:
        """Its claimant took it, or its test passed: its place in the window is free."""
        with self._cond:
            if job.taken and not job.released:
                self._outstanding -= 1
                self._cond.notify()
            job.released = True

    def _grow(self) -> None:
        thread = threading.Thread(
            target=self._work, name=f"slam-{self.name}-{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _take(self) -> Job[Any] | None:
        with self._cond:
            self._idle += 1
            try:
                while not self.stop.is_set():
                    while self._heap and self._heap[0][2].cancelled():
                        heapq.heappop(self._heap)  # taken by its claimant before it was sent
                    if self._heap and self._outstanding < self.window:
                        job = heapq.heappop(self._heap)[2]
                        if not job.released:
                            job.taken, self._outstanding = True, self._outstanding + 1
                        return job
                    self._cond.wait(TICK_S)
                return None
            finally:
                self._idle -= 1

    def _work(self) -> None:
        with self._cond:
            self._pools.append((threading.current_thread(), upstream.thread_pool()))
        while (job := self._take()) is not None:
            try:
                value = job.work(job)
            except Cancelled:
                continue
            except Exception as exc:  # a fault of ours: the claimant asks live
                if job.start():
                    job.set_exception(exc)
                continue
            if job.start():  # ended without sending (kept, stopped): its claimant reads why
                job.set_result(value)

    def close(self) -> None:
        """No more sends: the queued jobs cancelled, those in flight cut (their connections shut
        down and never resent), the workers joined."""
        with self._cond:
            self.stop.set()
            for _, _, job in self._heap:
                job.cancel()
            self._heap.clear()
            for _, pool in self._pools:  # what is in flight ends mid-answer
                upstream.shut_down(pool)
            self._cond.notify_all()
        until = time.monotonic() + JOIN_S
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(until - time.monotonic(), 0.0))
        with self._cond:
            for thread, pool in self._pools:
                if not thread.is_alive():  # one still ending may read its socket yet
                    upstream.close_pool(pool)


def patience(timeout_s: float) -> float:
    """The longest a claimant waits for a job in flight with no deadline of its caller's: a
    call's timeout, a try after it, and every 429's longest hold (limits.py) between them."""
    return 2 * timeout_s + MAX_HOLD_S * THROTTLE_RETRIES


def waited(job: Future[T], deadline: float | None, longest: float) -> bool:
    """Wait for a job its caller claimed: until it ends, the caller's ``deadline`` (a
    perf_counter moment) or ``longest`` seconds, in short slices so a Ctrl-C is heard."""
    until = time.perf_counter() + longest
    if deadline is not None:
        until = min(until, deadline)
    while not job.done():
        left = until - time.perf_counter()
        if left <= 0:
            return False
        try:
            job.exception(timeout=min(left, TICK_S))
        except TimeoutError:
            continue
    return True
