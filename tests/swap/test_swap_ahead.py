"""The queue of answers fetched ahead (swap/ahead.py), unit by unit: a real candidate queue asking
the loopback fake server through the run's own forward, and the base queue's bookkeeping with a
queue whose fetch is the test's. The plugin runs (tests/plugin/test_plugin_ahead.py) show the
whole path."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from patience import patient

from pytest_slam.records import Call, ModelSpec
from pytest_slam.swap.ahead import CandidateQueue, FetchQueue, Planned
from pytest_slam.swap.chat import ChatResult, Target
from pytest_slam.swap.limits import Limiter
from pytest_slam.swap.router import candidate_forward
from pytest_slam.swap.upstream import JSONObject
from pytest_slam.testing.fake_openai import FakeOpenAI

BODY = {"model": "gpt-4", "messages": [{"role": "user", "content": "Capital of France?"}]}


@pytest.fixture
def mini() -> Iterator[FakeOpenAI]:
    with FakeOpenAI("Paris.") as fake:
        yield fake


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for another thread to get somewhere (a guard against a hang, not a timing)."""
    give_up = time.monotonic() + patient(60)
    while not condition():
        assert time.monotonic() < give_up, f"never happened: {what}"
        time.sleep(0.01)


def _planned(order: int = 0, nodeid: str = "tests/test_a.py::test_a[mini]") -> Planned:
    return Planned(nodeid, "mini", "k1", dict(BODY), None, order)


class Fetched(FetchQueue):
    """A queue whose fetch is ``answer``: the call it ends with, or an exception it raises."""

    def __init__(self, answer: Callable[[Planned], Call], threads: int = 2) -> None:
        super().__init__("mini", Limiter("mini", threads))
        self.answer = answer

    def sent_body(self, planned: Planned) -> JSONObject:
        return dict(planned.body)

    def _fetch(self, planned: Planned) -> None:
        self._finish(planned, ChatResult(self.answer(planned)), [], 1)


def test_a_fetch_that_raises_ends_its_request_and_its_test_asks_live() -> None:
    """A fault of ours outside the fetch's own guard neither kills the worker nor leaves the
    request "sending" for a test to wait on for ever: it ends unanswered, and the next is sent."""

    def answer(planned: Planned) -> Call:
        if planned.order == 0:
            raise RuntimeError("a bug of ours")
        return Call("mini", "candidate", planned.body, text="Paris.")

    queue = Fetched(answer)
    broken, after = _planned(0), _planned(1, "tests/test_a.py::test_b[mini]")
    try:
        queue.add(broken)
        queue.add(after)
        assert broken.done.wait(timeout=patient(60)) and after.done.wait(timeout=patient(60))
        assert queue.claim(broken.claimant, broken.key, broken.sent) is None  # asked live
        claimed = queue.claim(after.claimant, after.key, after.sent)
    finally:
        queue.close()
    assert claimed is after and after.result is not None and after.result.call.text == "Paris."


def test_a_request_waiting_for_a_place_under_the_limit_is_asked_live_by_its_test(
    mini: FakeOpenAI,
) -> None:
    """Taken off the queue but not yet sent (every place under the limit in use): its test claims
    nothing and asks live at once, as a live call never waits for a place; the queue then gives
    its place back without sending it (the candidate is never asked one request twice)."""
    spec = ModelSpec("mini", "openai", "gpt-4o-mini", base_urls=[mini.base_url])
    limiter = Limiter("mini", 1)
    queue = CandidateQueue(
        spec, limiter, lambda s: Target(s, mini.base_url, None), candidate_forward(None)
    )
    limiter.enter()  # the one place: a test's own call in flight
    planned = _planned()
    try:
        queue.add(planned)
        _until(lambda: planned.state == "sending", "the worker took it off the queue")
        assert queue.claim(planned.claimant, planned.key, planned.sent) is None  # asked live
        limiter.leave(200)  # the place is free: the worker gets it, and finds it claimed
        assert planned.done.wait(timeout=patient(60))
    finally:
        queue.close()
    assert mini.requests == []  # the queue never sent it
    assert planned.state == "claimed" and not planned.answered
    assert limiter.in_flight == 0 and queue.fetched == 0  # its place given back


def test_a_claim_forgets_its_test_s_requests_once_all_are_claimed() -> None:
    queue = Fetched(lambda planned: Call("mini", "candidate", planned.body, text="Paris."))
    planned = _planned()
    try:
        queue.add(planned)
        assert planned.done.wait(timeout=patient(60))
        assert queue.claim(planned.claimant, planned.key, planned.sent) is planned
        assert queue.by_test == {}  # no empty list left per test (10,000 tests: 10,000 of them)
    finally:
        queue.close()


class Told:
    """A follower (the run's judge ahead) that keeps what it is told of."""

    def __init__(self) -> None:
        self.told: list[str] = []
        self.any = threading.Event()

    def fetched(self, planned: Planned) -> None:
        self.told.append(planned.nodeid)
        self.any.set()

    def passed(self, order: int) -> None: ...

    def close(self) -> None: ...

    def lines(self) -> list[str]:
        return []


def test_the_follower_is_told_of_answers_only_not_of_failed_calls() -> None:
    def answer(planned: Planned) -> Call:
        if planned.order == 0:
            return Call("mini", "candidate", planned.body, error="mini answered 500")
        return Call("mini", "candidate", planned.body, text="Paris.")

    queue, follower = Fetched(answer, threads=1), Told()  # one thread: fetched in order
    queue.follower = follower
    failed, answered = _planned(0), _planned(1, "tests/test_a.py::test_b[mini]")
    try:
        queue.add(failed)
        queue.add(answered)
        assert answered.done.wait(timeout=patient(60)) and follower.any.wait(timeout=patient(60))
        # the failed call ended (and was or was not told of) before the answered one was sent
        assert follower.told[0] == answered.nodeid  # the 500 is not judged ahead
    finally:
        queue.close()


def test_requests_queued_one_by_one_are_sent_to_the_replicas_in_turn() -> None:
    """Building a request's body picks no replica: queued and fetched one after the other (as a
    worker plans its tests a few at a time), the fetches still go to the replicas in turn."""
    from pytest_slam.swap.targets import Targets

    with FakeOpenAI("Paris.") as one, FakeOpenAI("Paris.") as two:
        spec = ModelSpec("mini", "openai", "gpt-4o-mini", base_urls=[one.base_url, two.base_url])
        queue = CandidateQueue(
            spec, Limiter("mini", 4), Targets().candidate, candidate_forward(None)
        )
        try:
            for order in range(4):
                planned = _planned(order, f"tests/test_a.py::test_{order}[mini]")
                queue.add(planned)
                _until(planned.done.is_set, "the request fetched")
        finally:
            queue.close()
        assert (len(one.requests), len(two.requests)) == (2, 2)  # old: (0, 4)
