"""The queue of answers fetched ahead (swap/ahead.py), unit by unit: a real candidate queue asking
the loopback fake server through the run's own forward, and the base queue's bookkeeping with a
queue whose fetch is the test's. The plugin runs (tests/plugin/test_plugin_ahead.py) show the
whole path."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from pytest_slam.records import ModelSpec
from pytest_slam.swap.ahead import CandidateQueue, Planned
from pytest_slam.swap.chat import Target
from pytest_slam.swap.limits import Limiter
from pytest_slam.swap.router import candidate_forward
from pytest_slam.testing.fake_openai import FakeOpenAI

BODY = {"model": "gpt-4", "messages": [{"role": "user", "content": "Capital of France?"}]}


@pytest.fixture
def mini() -> Iterator[FakeOpenAI]:
    with FakeOpenAI("Paris.") as fake:
        yield fake


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for another thread to get somewhere (a guard against a hang, not a timing)."""
    give_up = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < give_up, f"never happened: {what}"
        time.sleep(0.01)


def _planned(order: int = 0, nodeid: str = "tests/test_a.py::test_a[mini]") -> Planned:
    return Planned(nodeid, "mini", "k1", dict(BODY), None, order)


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
        assert planned.done.wait(timeout=60)
    finally:
        queue.close()
    assert mini.requests == []  # the queue never sent it
    assert planned.state == "claimed" and not planned.answered
    assert limiter.in_flight == 0 and queue.fetched == 0  # its place given back
