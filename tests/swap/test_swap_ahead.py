"""The queue of answers fetched ahead (swap/ahead.py), unit by unit: a real candidate queue asking
the loopback fake server through the run's own forward, and the claims' bookkeeping with a queue
whose fetch is the test's. The plugin runs (tests/plugin/test_plugin_ahead.py) show the whole
path; the broker under it is tests/swap/test_swap_broker.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from patience import patient

from pytest_slam.records import Call, ModelSpec
from pytest_slam.swap.ahead import CandidateQueue, Fetched, Fetches, FetchTally, Planned, merged
from pytest_slam.swap.broker import Job
from pytest_slam.swap.chat import ChatResult, Target
from pytest_slam.swap.limits import Limiter
from pytest_slam.swap.request import Request
from pytest_slam.swap.router import candidate_forward
from pytest_slam.swap.targets import Targets
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


def _ended(planned: Planned) -> bool:
    return planned.job is not None and planned.job.done()


class Answering(Fetches):
    """A queue whose fetch is ``answer``: the call it ends with, or an exception it raises."""

    def __init__(self, answer: Callable[[Planned], Call], threads: int = 2) -> None:
        super().__init__("mini", Limiter("mini", threads))
        self.answer = answer

    def request_for(self, planned: Planned) -> Request:
        return Request(planned.body, dict(planned.body), planned.key)

    def fetch(self, planned: Planned, job: Job[Fetched]) -> Fetched:
        job.sent()
        return Fetched(ChatResult(self.answer(planned)), [], 1)


def test_a_fetch_that_raises_ends_its_request_and_its_test_asks_live() -> None:
    """A fault of ours inside a fetch neither kills the worker nor leaves the request in flight
    for a test to wait on for ever: it ends unanswered, and the next is sent."""

    def answer(planned: Planned) -> Call:
        if planned.order == 0:
            raise RuntimeError("a bug of ours")
        return Call("mini", "candidate", planned.body, text="Paris.")

    queue = Answering(answer)
    broken, after = _planned(0), _planned(1, "tests/test_a.py::test_b[mini]")
    try:
        queue.add(broken)
        queue.add(after)
        _until(lambda: _ended(broken) and _ended(after), "both fetches ended")
        taken = queue.claim(broken.claimant, broken.key, broken.sent)
        claimed = queue.claim(after.claimant, after.key, after.sent)
    finally:
        queue.close()
    assert taken is broken and broken.result is None  # no answer: its test asks live
    assert claimed is after and after.result is not None and after.result.call.text == "Paris."


def test_a_request_waiting_for_a_place_under_the_limit_is_asked_live_by_its_test(
    mini: FakeOpenAI,
) -> None:
    """Taken by a worker but not yet sent (every place under the limit in use): its test cancels
    it and asks live at once, as a live call never waits for a place; the worker then gives its
    place back without sending it (the candidate is never asked one request twice)."""
    spec = ModelSpec("mini", "openai", "gpt-4o-mini", base_urls=[mini.base_url])
    limiter = Limiter("mini", 1)
    queue = CandidateQueue(
        spec, limiter, lambda s: Target(s, mini.base_url, None), candidate_forward(None)
    )
    limiter.enter()  # the one place: a test's own call in flight
    planned = _planned()
    try:
        queue.add(planned)
        _until(lambda: planned.job is not None and planned.job.taken, "a worker took it")
        assert queue.claim(planned.claimant, planned.key, planned.sent) is None  # asked live
        limiter.leave(200)  # the place is free: the worker gets it, and finds it cancelled
        _until(lambda: limiter.in_flight == 0, "the worker gave its place back")
    finally:
        queue.close()
    assert mini.requests == []  # the queue never sent it
    assert planned.job is not None and planned.job.cancelled() and not planned.answered
    assert queue.fetched == 0


def test_a_claim_forgets_its_test_s_requests_once_all_are_claimed() -> None:
    queue = Answering(lambda planned: Call("mini", "candidate", planned.body, text="Paris."))
    planned = _planned()
    try:
        queue.add(planned)
        _until(lambda: _ended(planned), "the fetch ended")
        assert queue.claim(planned.claimant, planned.key, planned.sent) is planned
        assert queue.by_test == {}  # no empty list left per test (10,000 tests: 10,000 of them)
    finally:
        queue.close()
    assert (queue.fetched, queue.used, queue.unused) == (1, 1, 0)


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

    queue, follower = Answering(answer, threads=1), Told()  # one worker: fetched in order
    queue.follower = follower
    failed, answered = _planned(0), _planned(1, "tests/test_a.py::test_b[mini]")
    try:
        queue.add(failed)
        queue.add(answered)
        assert follower.any.wait(timeout=patient(60))
        _until(lambda: _ended(failed), "the failed call ended")
    finally:
        queue.close()
    assert follower.told == [answered.nodeid]  # the 500 is not judged ahead


def test_a_follow_up_is_queued_after_an_answer_for_the_same_model() -> None:
    """``Planned.follow_up`` (the planner's hook for a conversation's next turn): called once the
    fetched call answered OK, outside the queue's locks; what it returns is fetched and claimed
    like any planned request. A failed call has no follow-up."""

    def answer(planned: Planned) -> Call:
        if planned.key == "broken":
            return Call("mini", "candidate", planned.body, error="mini answered 500")
        return Call("mini", "candidate", planned.body, text=f"turn {planned.key}")

    followed: list[str] = []

    def next_turn(planned: Planned) -> Planned | None:
        followed.append(planned.key)
        assert planned.result is not None  # the answer it follows is there to read
        said = planned.result.call.text
        messages = [*BODY["messages"], {"role": "assistant", "content": said}]  # type: ignore[list-item]
        return Planned(planned.nodeid, "mini", "k2", {**BODY, "messages": messages}, None, 0)

    queue = Answering(answer)
    first = _planned()
    first.follow_up = next_turn
    broken = Planned("tests/test_a.py::test_b[mini]", "mini", "broken", dict(BODY), None, 1)
    broken.follow_up = next_turn
    try:
        queue.add(first)
        queue.add(broken)
        _until(lambda: queue.fetched == 3, "both requests and the follow-up fetched")
        second = queue.by_test[(first.nodeid, "k2")][0]
        claimed = queue.claim(first.nodeid, "k2", second.sent)
    finally:
        queue.close()
    assert followed == ["k1"]  # not after the 500
    assert claimed is second and claimed.result is not None
    assert claimed.result.call.text == "turn k2"
    assert second.body["messages"][-1] == {"role": "assistant", "content": "turn k1"}  # type: ignore[index]


def test_requests_queued_one_by_one_are_sent_to_the_replicas_in_turn() -> None:
    """Building a request's body picks no replica: queued and fetched one after the other (as a
    worker plans its tests a few at a time), the fetches still go to the replicas in turn."""
    with FakeOpenAI("Paris.") as one, FakeOpenAI("Paris.") as two:
        spec = ModelSpec("mini", "openai", "gpt-4o-mini", base_urls=[one.base_url, two.base_url])
        queue = CandidateQueue(
            spec, Limiter("mini", 4), Targets().candidate, candidate_forward(None)
        )
        try:
            for order in range(4):
                planned = _planned(order, f"tests/test_a.py::test_{order}[mini]")
                queue.add(planned)
                _until(lambda p=planned: _ended(p), "the request fetched")  # type: ignore[misc]
        finally:
            queue.close()
        assert (len(one.requests), len(two.requests)) == (2, 2)  # old: (0, 4)


def test_the_request_a_fetched_answer_foresees_is_queued_unless_its_test_took_the_answer() -> None:
    """``Planned.follow_up`` (a conversation's next turn, run/test/fetching.py): queued and fetched
    for the same model when the call answers before its test claims it; not when the test was
    already waiting for it (the test asks its next turn itself: never asked twice)."""
    release = threading.Event()

    def answer(planned: Planned) -> Call:
        if planned.key == "slow":
            release.wait(timeout=patient(60))
        return Call("mini", "candidate", planned.body, text=f"answer to {planned.key}")

    def next_turn(planned: Planned) -> Planned:
        return Planned(planned.nodeid, "mini", f"after {planned.key}", dict(BODY), None, 0)

    queue = Answering(answer)
    free = Planned("tests/test_a.py::test_a[mini]", "mini", "free", dict(BODY), None, 0,
                   follow_up=next_turn)  # fmt: skip
    slow = Planned("tests/test_a.py::test_b[mini]", "mini", "slow", dict(BODY), None, 1,
                   follow_up=next_turn)  # fmt: skip
    try:
        queue.add(free)
        queue.add(slow)
        _until(lambda: slow.job is not None and slow.job.running(), "the slow call sent")
        taken = queue.claim(slow.claimant, "slow", slow.sent)  # its test takes it, unanswered
        release.set()
        _until(lambda: _ended(slow), "the slow call answered")
        _until(lambda: queue.fetched == 3, "the foreseen request of the free call fetched")
        foreseen = queue.claim(free.claimant, "after free", dict(BODY))
    finally:
        queue.close()
    assert taken is slow
    assert foreseen is not None and foreseen.result is not None
    assert foreseen.result.call.text == "answer to after free"
    assert (slow.claimant, "after slow") not in queue.by_test  # never queued
    assert queue.fetched == 3


def test_a_follow_up_goes_before_later_tests_calls_waiting_for_a_place() -> None:
    """A conversation's next turn (``Planned.follow_up``), queued once its test's first answer
    came, is sent in its test's order: before the later tests' calls that were already waiting
    for a place under the limit (before, those waited first come, first served, and the running
    test's next turn went after every one of them)."""
    with FakeOpenAI(lambda req: "Paris.", latency_s=0.3) as mini:
        spec = ModelSpec("mini", "openai", "gpt-4o-mini", base_urls=[mini.base_url])
        limiter, held = Limiter("mini", 4), threading.Event()
        for _ in range(3):  # three of the four places taken: one left for the fetches
            limiter.acquire(held)
        queue = CandidateQueue(spec, limiter, Targets().candidate, candidate_forward(None))

        def next_turn(planned: Planned) -> Planned:
            return Planned(planned.nodeid, "mini", "k2", _asking("next turn"), None, planned.order)

        first = Planned("tests/test_a.py::test_0[mini]", "mini", "k1", _asking("q0"), None, 0,
                        follow_up=next_turn)  # fmt: skip
        later = [
            Planned(f"tests/test_a.py::test_{n}[mini]", "mini", "k1", _asking(f"q{n}"), None, n)
            for n in range(1, 6)
        ]
        try:
            for planned in [first, *later]:
                queue.add(planned)
            _until(lambda: queue.fetched == 7, "every request and the next turn fetched")
        finally:
            queue.close()
    asked = [r.json["messages"][-1]["content"] for r in mini.requests if r.json]
    # q0, then the next turn (or the one call that took the free place while q0's answer came)
    assert asked.index("next turn") <= 2, asked


def _asking(content: str) -> dict[str, object]:
    return {"model": "gpt-4", "messages": [{"role": "user", "content": content}]}


def test_the_workers_fetch_tallies_are_one_line_per_model() -> None:
    """Under xdist each worker counted its own fetches and printed its own line, naming no worker
    (issue 52): the controller adds them up, one line per model, saying how many workers."""
    gw0 = FetchTally("mini", 9, 9, 1, 16).as_dict()
    gw1 = FetchTally("mini", 3, 1, 2, 10).as_dict()
    ref = FetchTally("gpt-4 (reference)", 4, 4, 4, 16).as_dict()
    lines = [t.line() for t in merged([gw0, gw1, ref, {"label": "broken"}])]
    assert lines == [
        "mini: 12 call(s) fetched ahead, 10 used; 2 fetched, unused "
        "(up to 2 at once, concurrency 16 on each of 2 workers)",
        "gpt-4 (reference): 4 call(s) fetched ahead, 4 used (up to 4 at once, concurrency 16)",
    ]
