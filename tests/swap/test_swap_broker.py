"""One server's broker (swap/broker.py): its scheduler, its bounded pool of workers and its jobs as
futures, with jobs that are the test's own work (what a worker does, never how long it takes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from patience import patient

from pytest_slam.swap.broker import Cancelled, Job, Server, waited


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for another thread to get somewhere (a guard against a hang, not a timing)."""
    give_up = time.monotonic() + patient(60)
    while not condition():
        assert time.monotonic() < give_up, f"never happened: {what}"
        time.sleep(0.01)


def _workers(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"slam-{name}-")]


def test_the_pool_is_bounded_made_as_needed_and_joined_at_close() -> None:
    """Ten jobs that wait: three workers (its bound) take three, no thread per job; at close the
    queued ones are cancelled unsent and every worker has ended (old: a thread per place,
    never joined)."""
    server, gate, running = Server("bounded", workers=3), threading.Event(), []

    def work(job: Job[int]) -> int:
        job.sent()
        running.append(job.order)
        gate.wait(60)
        return job.order

    assert _workers("bounded") == []  # nothing started before the first job
    jobs = [server.submit(order, work) for order in range(10)]
    _until(lambda: len(running) == 3, "three jobs running")
    assert len(_workers("bounded")) == 3
    gate.set()
    _until(lambda: all(job.done() for job in jobs[:3]), "the first three ended")
    server.close()
    assert _workers("bounded") == []
    assert [job.result() for job in jobs[:3]] == [0, 1, 2]
    assert all(job.done() for job in jobs)  # none left for a claimant to wait on
    assert sorted(running) == sorted({*running})  # none done twice


def test_jobs_are_taken_in_test_order_whatever_order_they_came_in() -> None:
    server, gate, done = Server("ordered", workers=1), threading.Event(), []

    def work(job: Job[None]) -> None:
        job.sent()
        if job.order == 0:
            gate.wait(60)
        done.append(job.order)

    try:
        first = server.submit(0, work)
        _until(first.running, "the first job running")
        later = [server.submit(order, work) for order in (7, 3, 5)]
        gate.set()
        _until(lambda: all(job.done() for job in later), "every job ended")
    finally:
        server.close()
    assert done == [0, 3, 5, 7]


def test_a_claim_cancels_a_job_not_started_and_waits_for_one_started() -> None:
    """A claim is a future's: ``cancel`` succeeds only while it is not started (its claimant asks
    live and the job is never sent), else the claimant waits for its result."""
    server, gate, sent = Server("claims", workers=1), threading.Event(), []

    def work(job: Job[str]) -> str:
        job.sent()
        sent.append(job.order)
        gate.wait(60)
        return f"answer {job.order}"

    try:
        started = server.submit(0, work)
        _until(started.running, "the first job sent")
        queued = server.submit(1, work)
        assert queued.cancel()  # not started: asked live by its claimant
        assert not started.cancel()  # sent: its claimant takes its answer
        assert not waited(started, time.perf_counter(), 60)  # the caller's deadline passed
        gate.set()
        assert waited(started, None, 60) and started.result() == "answer 0"
    finally:
        server.close()
    assert sent == [0]  # the cancelled one never went out


def test_a_job_cancelled_while_it_waits_for_a_place_is_never_sent() -> None:
    """Taken by a worker, waiting (for a place under the limit): cancelled meanwhile, its
    ``sent`` raises ``Cancelled`` and nothing goes out."""
    server, place, outcome = Server("place", workers=1), threading.Event(), []

    def work(job: Job[str]) -> str:
        place.wait(60)  # the limiter's wait for a place
        try:
            job.sent()
        except Cancelled:
            outcome.append("not sent")
            raise
        outcome.append("sent")
        return "answer"

    try:
        job = server.submit(0, work)
        _until(lambda: job.taken, "a worker took it")
        assert job.cancel()
        place.set()
        _until(lambda: bool(outcome), "the worker got its place")
    finally:
        server.close()
    assert outcome == ["not sent"] and job.cancelled()


def test_a_closed_server_takes_no_more_jobs() -> None:
    server = Server("closed", workers=2)
    server.close()
    job = server.submit(0, lambda job: "never")
    assert job.cancelled()
    assert _workers("closed") == []
