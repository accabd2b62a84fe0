"""The limiter (swap/limits.py, swap/adaptive.py): at most N at the server, the test's own call
included and served first, refusals remembered, Retry-After bounded, a sample sent alone.

Real calls to the loopback FakeOpenAI where the server's own count is the evidence; the limiter's
state (its places, its limit) where the rule itself is. Threads are waited for by condition (a
guard against a hang), never timed.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from patience import patient

from pytest_slam.records import Call, ModelSpec
from pytest_slam.swap.adaptive import INITIAL, START, Probe
from pytest_slam.swap.chat import ChatResult, hold_seconds
from pytest_slam.swap.limits import BACKOFF_S, Limiter, Sample, hold_of
from pytest_slam.testing.fake_openai import FakeOpenAI

BODY = {"model": "m", "messages": [{"role": "user", "content": "Capital of France?"}]}


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for another thread to get somewhere (a guard against a hang, not a timing)."""
    give_up = time.monotonic() + patient(60)
    while not condition():
        assert time.monotonic() < give_up, f"never happened: {what}"
        time.sleep(0.005)


def _ask(fake: FakeOpenAI) -> Callable[[], ChatResult]:
    def send() -> ChatResult:
        request = urllib.request.Request(
            fake.base_url + "/chat/completions",
            json.dumps(BODY).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=patient(60)) as response:
            answer = json.load(response)
        call = Call("m", "candidate", BODY, text=answer["choices"][0]["message"]["content"])
        return ChatResult(call, status=response.status)

    return send


@pytest.fixture
def slow() -> Iterator[FakeOpenAI]:
    with FakeOpenAI("Paris.", latency_s=0.2) as fake:
        yield fake


def _fetch(
    limiter: Limiter, send: Callable[[], ChatResult], stop: threading.Event
) -> threading.Thread:
    thread = threading.Thread(target=limiter.send, args=(send, stop), daemon=True)
    thread.start()
    return thread


def test_n_is_never_exceeded_at_the_server_the_test_s_own_call_included(slow: FakeOpenAI) -> None:
    """At concurrency 2 with two fetched calls in flight, the test's own call waits for a place:
    the server never has 3 (before, a test's own call skipped the limit: N meant N + 1)."""
    limiter, stop = Limiter("m", 2), threading.Event()
    fetched = [_fetch(limiter, _ask(slow), stop) for _ in range(4)]
    _until(lambda: limiter.in_flight == 2, "two fetched calls in flight")
    result, in_flight = limiter.send(_ask(slow))  # the test's own call
    for thread in fetched:
        thread.join(timeout=patient(60))
    assert result is not None and result.status == 200 and in_flight <= 2
    assert slow.peak_in_flight == 2 and limiter.peak == 2
    assert len(slow.requests) == 5


def test_the_running_test_s_call_is_served_before_fetched_calls_waiting() -> None:
    """A place that frees goes to the test's own call, though fetched calls waited longer."""
    limiter, stop = Limiter("m", 1), threading.Event()
    limiter.acquire(stop)  # the one place taken
    order: list[str] = []

    def fetched() -> None:
        if limiter.acquire(stop) is not None:
            order.append("fetched")
            limiter.leave(200)

    def own() -> None:
        limiter.enter()
        order.append("own")
        limiter.leave(200)

    waiting = [threading.Thread(target=fetched) for _ in range(3)]
    for thread in waiting:
        thread.start()
    _until(lambda: limiter.waiting() == (0, 3), "three fetched calls waiting")
    test = threading.Thread(target=own)
    test.start()
    _until(lambda: limiter.waiting() == (1, 3), "the test's own call waiting")
    limiter.leave(200)
    for thread in [test, *waiting]:
        thread.join(timeout=patient(60))
    assert order[0] == "own" and order.count("fetched") == 3


def test_a_managed_engine_keeps_a_place_for_the_running_test() -> None:
    """Eight fetched calls wanting the embedded engine's 8 slots get 7; the test's own call
    enters at once (before, 8 fetched answers filled the slots and the test's call timed out)."""
    spec = ModelSpec("smollm2-135m", "llamacpp", "SmolLM2-135M-Instruct", concurrency=8)
    limiter, stop = Limiter.of(spec), threading.Event()
    assert limiter.reserve and limiter.limit == 8
    threads = [threading.Thread(target=limiter.acquire, args=(stop,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    _until(lambda: limiter.in_flight == 7 and limiter.waiting() == (0, 1), "7 in, 1 waiting")
    assert limiter.enter() == 8  # the test's own call: the kept slot
    stop.set()
    for thread in threads:
        thread.join(timeout=patient(60))
    assert limiter.peak == 8


def test_a_refusal_cap_is_remembered_the_limit_never_climbs_past_it() -> None:
    """A 429 while 11 others were answered sets the limit to 11, and a run of answers after it
    never raises it again (before: halved to 8, then climbed back by one per 8 answers, into
    the same refusals: a saw tooth)."""
    limiter, stop = Limiter("m", 16), threading.Event()
    for _ in range(12):
        limiter.acquire(stop)
    limiter.leave(429, 0.0)
    assert limiter.limit == 11
    for _ in range(11):
        limiter.leave(200)
    for _ in range(200):
        limiter.acquire(stop)
        limiter.leave(200)
    assert limiter.limit == 11 and limiter.lowered == 1
    line = limiter.line()
    assert line is not None and "settled at 11 (the server refused past 11 (429))" in line


@pytest.mark.parametrize("hold", [-5.0, math.nan, math.inf, 3600.0, None])
def test_a_retry_after_out_of_bounds_holds_the_default_backoff(hold: float | None) -> None:
    """A negative, NaN or absurd Retry-After once held nothing (or an hour): the default."""
    assert hold_of(hold) == BACKOFF_S
    limiter, stop = Limiter("m", 4), threading.Event()
    limiter.acquire(stop)
    limiter.leave(429, hold)  # the first lowers the limit to 1 (a cap: only its retry waits)
    assert limiter.limit == 1 and limiter.held() == 0
    limiter.acquire(stop)
    limiter.leave(429, hold)  # refused at 1: a rate, every fetched call waits
    assert 0 < limiter.held() <= BACKOFF_S


def test_a_retry_after_in_bounds_is_honoured_and_read_as_sent() -> None:
    assert hold_of(2.5) == 2.5 and hold_of(0.0) == 0.0
    assert hold_seconds({"retry-after": "-5"}) == -5.0  # the limiter bounds it, not a 0 s hold
    assert hold_seconds({"retry-after-ms": "250"}) == 0.25


def test_the_adaptive_limit_starts_slow_reaches_16_and_rises_while_throughput_rises() -> None:
    """A batching engine of 32 a step: each token takes a step while the batch has room, and
    longer by the queue past it; the limit climbs past 16 and settles near the batch, not past
    it (Little's law over each round's calls: in flight / seconds per token)."""
    probe = Probe(64, adaptive=True)
    assert probe.limit == START
    while probe.limit < INITIAL:
        probe.answered(probe.round, True, 0.02, probe.limit)
    assert probe.limit == 2 * INITIAL and not probe.settled  # slow start's answers paid: doubled
    for _ in range(40):
        limit, sent = probe.limit, probe.round
        for _ in range(limit):
            probe.answered(sent, True, 0.02 * max(1.0, limit / 32), limit)
        if probe.settled:
            break
    assert probe.settled and 28 <= probe.limit <= 40, probe.why  # at the batch, not past it
    assert "throughput stopped rising" in probe.why


def _climb(pace_at: Callable[[int], float]) -> tuple[list[int], Probe]:
    """The limits an adaptive probe goes through, round by round, on a server whose seconds per
    token at ``n`` in flight are ``pace_at(n)``, until it settles."""
    probe = Probe(64, adaptive=True)
    while probe.limit < INITIAL:
        probe.answered(probe.round, True, pace_at(probe.limit), probe.limit)
    limits = [probe.limit]
    while not probe.settled and len(limits) < 20:
        limit, sent = probe.limit, probe.round
        for _ in range(limit):
            probe.answered(sent, True, pace_at(limit), limit)
        limits.append(probe.limit)
    return limits, probe


def test_the_limit_doubles_while_each_rise_pays_in_proportion() -> None:
    """A batching engine of 32 a step has room under its batch: each rise pays in proportion, so
    the limit doubles, and with slow start's answers as its first round it is at the batch when
    slow start ends (before: 16 -> 20 -> 25 -> 31, four rounds of answers of 2 to 6 s after it,
    most of a 200-case run, at a mean batch of 21 of 32), then settles there. A server 10% slower
    per call in flight, whose first rise paid less than half of what its places could add,
    rises a quarter at a time after it."""
    limits, probe = _climb(lambda n: 0.02 * max(1.0, n / 32))
    assert limits == [32, 64, 32] and probe.settled, probe.why
    limits, probe = _climb(lambda n: 0.03 * (1 + 0.1 * (n - 1)))
    assert limits[:2] == [32, 40] and probe.settled and probe.limit == 32, probe.why


def test_a_run_that_does_not_fill_its_places_teaches_the_limit_nothing() -> None:
    probe = Probe(64, adaptive=True)
    probe.limit = INITIAL
    for _ in range(100):
        probe.answered(probe.round, False, 0.02, 3)
    assert probe.limit == INITIAL and not probe.settled


def test_a_fixed_limit_stays_and_one_at_a_time_sends_nothing_alone() -> None:
    limiter, stop = Limiter("m", 1, sample=Sample(3, 2)), threading.Event()
    for _ in range(10):
        limiter.acquire(stop)
        limiter.leave(200)
    assert limiter.limit == 1 and limiter.alone_sent == 0 and limiter.line() is None


def test_a_sampled_call_goes_alone_the_others_held_until_it_ends(slow: FakeOpenAI) -> None:
    """The first call and every 4th are sent with nothing else in flight at the server, and
    marked so; the others go 4 at a time."""
    limiter, stop = Limiter("m", 4, sample=Sample(1, 4)), threading.Event()
    results: list[ChatResult | None] = []

    def fetch() -> None:
        results.append(limiter.send(_ask(slow), stop)[0])

    threads = [threading.Thread(target=fetch) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=patient(60))
    alone = [r for r in results if r is not None and r.call.alone]
    assert len(results) == 12 and len(alone) == 4 == limiter.alone_sent  # the 1st, 4th, 8th, 12th
    assert slow.peak_in_flight <= 4


def test_a_test_s_own_call_is_never_held_back_behind_a_call_sent_alone() -> None:
    """A sampled call hangs at the server; the running test's own call is sent beside it at once
    (its caller's timeout runs: held back, it timed out though the server would have answered),
    and the sample, which then had company, is not counted as a lone latency."""
    limiter, stop, release = (
        Limiter("m", 4, sample=Sample(1, 0)),
        threading.Event(),
        threading.Event(),
    )
    sample: list[ChatResult | None] = []

    def hanging() -> ChatResult:
        release.wait(timeout=patient(60))
        return ChatResult(Call("m", "candidate", BODY, text="Paris."))

    thread = threading.Thread(target=lambda: sample.append(limiter.send(hanging, stop)[0]))
    thread.start()
    _until(lambda: limiter.in_flight == 1, "the sample sent alone")
    own, in_flight = limiter.send(lambda: ChatResult(Call("m", "candidate", BODY, text="Rome.")))
    assert own is not None and own.call.text == "Rome." and in_flight == 2  # beside the sample
    release.set()
    thread.join(timeout=patient(60))
    assert sample and sample[0] is not None and not sample[0].call.alone
    assert not own.call.alone and limiter.alone_sent == 0
    # the sample is sent again: the next call goes alone (before, a run whose first test's call
    # came beside its one sample had no lone latency at all)
    again, in_flight = limiter.send(lambda: ChatResult(Call("m", "candidate", BODY)), stop)
    assert again is not None and again.call.alone and limiter.alone_sent == 1
