"""Calls of the test process reach the swap proxy in memory (swap/local.py), and see what they would
over its loopback socket: the same answers, streams, errors, retries and timeouts.

Real parts throughout: the openai SDK's default sync client, the SwapProxy and SwapRouter the plugin
starts, a running test context, and FakeOpenAI on loopback as the candidate. The proxy counts the
socket connections it accepts, so each test can tell which way a call went.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import os
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass

import openai
import pytest
from slam_helpers import wait_for

from pytest_slam.swap import redirect
from pytest_slam.swap.chat import ChatResult
from pytest_slam.swap.limits import THROTTLE_RETRIES
from pytest_slam.swap.models import resolve
from pytest_slam.swap.proxy import SwapProxy
from pytest_slam.swap.router import SwapRouter, TestContext, Upstream
from pytest_slam.testing import FakeOpenAI

ANSWER = "Refunds take five to seven business days."
MESSAGES = [{"role": "user", "content": "How long does a refund take?"}]


class CountingProxy(SwapProxy):
    """The real proxy, counting the socket connections it accepts."""

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.sockets = 0

    def process_request(self, request: object, client_address: object) -> None:
        self.sockets += 1
        super().process_request(request, client_address)  # type: ignore[arg-type]


@dataclass
class Swap:
    proxy: CountingProxy
    router: SwapRouter
    ctx: TestContext
    fake: FakeOpenAI

    def client(self, **kw: object) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.proxy.base_url, api_key="sk-product", **kw)  # type: ignore[arg-type]


@dataclasses.dataclass
class _Golden:
    """The router's golden side (router.GoldenSide), noting what each step is handed; its
    reference route breaks, as an unreadable store would."""

    keyed: list[str] = dataclasses.field(default_factory=list)
    handed: list[tuple[str, str | None]] = dataclasses.field(default_factory=list)

    def key(self, body: dict[str, object]) -> str:
        from pytest_slam.golden.keys import request_key

        self.keyed.append(request_key(body))  # type: ignore[arg-type]
        return self.keyed[-1]

    def reused(self) -> tuple[int, float] | None:
        return None

    def reference_first(self, ctx: object, body: object, key: str | None) -> int | None:
        self.handed.append(("cap", key))
        return None

    def miss_before(
        self, ctx: object, body: object, turn: int, key: str | None, follows: int | None = None
    ) -> tuple[str, str] | None:
        self.handed.append(("miss", key))
        return None

    def chat(self, ctx: object, body: object, relay: object) -> ChatResult:
        raise RuntimeError("reference store unreadable")


def _swap(fake: FakeOpenAI, local: bool) -> Iterator[Swap]:
    spec = resolve(fake.base_url + "#cand")
    router = SwapRouter({spec.name: spec}, Upstream(fake.base_url))
    proxy = CountingProxy(router).start()
    ctx = TestContext("tests/test_x.py::test_x[cand]", "test_x", "tests/test_x.py", spec)
    router.active = ctx
    rule = redirect.install(lambda: proxy.base_url, server=proxy if local else None)
    try:
        yield Swap(proxy, router, ctx, fake)
    finally:
        redirect.uninstall(rule)
        router.active = None
        proxy.stop()


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(ANSWER, model="cand-model") as server:
        yield server


@pytest.fixture
def swap(fake: FakeOpenAI) -> Iterator[Swap]:
    yield from _swap(fake, local=True)


@pytest.fixture
def over_socket(fake: FakeOpenAI) -> Iterator[Swap]:
    yield from _swap(fake, local=False)


def _ask(client: openai.OpenAI, stream: bool) -> tuple[str, str | None]:
    if stream:
        chunks = client.chat.completions.create(model="gpt-4", messages=MESSAGES, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return text, None
    reply = client.chat.completions.create(model="gpt-4", messages=MESSAGES)
    return reply.choices[0].message.content or "", reply.choices[0].finish_reason


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_call_is_answered_and_recorded_without_a_socket(swap: Swap, stream: bool) -> None:
    with swap.client(max_retries=0) as client:
        text, finish = _ask(client, stream)
    assert text == ANSWER
    assert finish in (None, "stop")
    assert swap.proxy.sockets == 0  # in memory: the proxy's socket never saw it
    [call] = swap.ctx.calls
    assert (call.text, call.model, call.streamed, call.error) == (ANSWER, "cand", stream, None)
    assert call.ttft_ms is not None and call.e2e_ms is not None
    assert swap.fake.requests[-1].json["stream"] is True  # timed from a stream, as over the socket


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_the_answer_is_the_one_the_socket_gives(fake: FakeOpenAI, stream: bool) -> None:
    """Field by field, the SDK object a product reads is the same either way (ids and times aside)."""
    seen = []
    for local in (True, False):
        with contextlib.closing(_swap(fake, local)) as swaps:
            swap = next(swaps)
            with swap.client(max_retries=0) as client:
                raw = client.chat.completions.with_raw_response.create(
                    model="gpt-4", messages=MESSAGES, stream=stream, logprobs=True, top_logprobs=2
                )
                if stream:
                    body = [c.model_dump(exclude={"id", "created"}) for c in raw.parse()]
                else:
                    body = raw.parse().model_dump(exclude={"id", "created"})
            headers = {k: v for k, v in raw.headers.items() if k != "date"}
            seen.append((raw.status_code, headers.get("content-type"), body))
            assert swap.proxy.sockets == (0 if local else 1)
    assert seen[0] == seen[1]


def test_an_upstream_error_keeps_its_status_body_and_retry_advice() -> None:
    """A 429 is asked again by the swap (limits.py) up to THROTTLE_RETRIES times; past them the
    caller gets it as the server sent it, and its own retries go on as over the socket."""
    tries = THROTTLE_RETRIES + 1
    limited = FakeOpenAI(ANSWER, fail=[429] * 2 * tries, retry_after_s=0.001)
    with limited, contextlib.closing(_swap(limited, local=True)) as swaps:
        swap = next(swaps)
        with swap.client(max_retries=0) as client:
            with pytest.raises(openai.RateLimitError) as caught:
                client.chat.completions.create(model="gpt-4", messages=MESSAGES)
            assert caught.value.status_code == 429
            assert caught.value.response.headers.get("retry-after")
        with swap.client(max_retries=2) as client:  # the SDK retries it, as over the socket
            assert _ask(client, stream=False)[0] == ANSWER
        assert swap.proxy.sockets == 0
        assert [c.error_kind for c in swap.ctx.calls] == ["http", "http", None]
        assert len(limited.requests) == 2 * tries + 1


@pytest.mark.parametrize("local", [True, False], ids=["in-memory", "socket"])
def test_an_answer_that_comes_after_the_caller_gave_up_is_not_evidence(local: bool) -> None:
    """The caller's read timeout ends its wait, as on any server; the call goes on server side and
    ends, but the product never saw that answer, so it is recorded as unanswered. (An explicit
    ``stream=False`` is served by a worker in memory, which goes on as the socket's handler does.)"""
    slow = FakeOpenAI(ANSWER, latency_s=1.5)
    with slow, contextlib.closing(_swap(slow, local=local)) as swaps:
        swap = next(swaps)
        with (
            swap.client(max_retries=0, timeout=0.2) as client,
            pytest.raises(openai.APITimeoutError),
        ):
            client.chat.completions.create(model="gpt-4", messages=MESSAGES, stream=False)
        assert swap.ctx.calls == []  # not yet: the model is still answering
        wait_for(lambda: swap.ctx.calls, 10, "the abandoned call to end")
        [call] = swap.ctx.calls
        assert call.error_kind == "timeout" and not call.ok
        assert "the caller gave up (its own timeout)" in (call.error or "")
        assert swap.proxy.sockets == (0 if local else 1)
        assert swap.proxy.workers.started == (1 if local else 0)


@pytest.mark.parametrize("local", [True, False], ids=["in-memory", "socket"])
def test_a_stream_whose_caller_gave_up_is_a_failed_call(local: bool) -> None:
    """The caller's read timeout ends its wait for the first chunk; when that chunk comes, the
    caller is gone: the call is recorded then, failed, never left out."""
    slow = FakeOpenAI(ANSWER, latency_s=1.5, ttft_s=1.0)
    with slow, contextlib.closing(_swap(slow, local=local)) as swaps:
        swap = next(swaps)
        with (
            swap.client(max_retries=0, timeout=0.2) as client,
            pytest.raises(openai.APITimeoutError),
        ):
            _ask(client, stream=True)
        wait_for(lambda: swap.ctx.calls, 10, "the abandoned stream to be recorded")
        [call] = swap.ctx.calls
        assert call.error_kind == "timeout" and call.streamed and call.e2e_ms
        assert "the caller stopped reading" in (call.error or "")


def test_a_call_still_in_flight_when_the_test_ends_is_recorded_failed_once() -> None:
    """The test's end (``settle``) records the call its caller gave up on; the call's own end,
    later, adds nothing."""
    slow = FakeOpenAI(ANSWER, latency_s=1.0)
    with slow, contextlib.closing(_swap(slow, local=False)) as swaps:
        swap = next(swaps)
        with (
            swap.client(max_retries=0, timeout=0.2) as client,
            pytest.raises(openai.APITimeoutError),
        ):
            _ask(client, stream=False)
        swap.ctx.settle(0.05)
        [call] = swap.ctx.calls
        assert call.error_kind == "timeout" and call.e2e_ms is not None and call.e2e_ms >= 150
        assert "it was still in flight when the test ended" in (call.error or "")
        time.sleep(1.5)  # the model answers at 1.0 s, to a caller long gone
        assert len(swap.ctx.calls) == 1 and swap.ctx.flights == []


def test_a_plain_call_is_served_in_the_callers_thread_a_stream_by_a_worker(swap: Swap) -> None:
    """A plain call, whatever its timeout (its deadline holds in place), is served in the caller's
    thread; a stream must reach the caller while it is made, so a worker serves it."""
    for timeout in (None, 5.0):
        with swap.client(max_retries=0, timeout=timeout) as client:
            assert _ask(client, stream=False)[0] == ANSWER
    assert swap.proxy.workers.started == 0
    with swap.client(max_retries=0) as client:
        assert _ask(client, stream=True)[0] == ANSWER
        assert _ask(client, stream=True)[0] == ANSWER  # the same worker, free again
    assert swap.proxy.workers.started == 1
    assert len(swap.ctx.calls) == 4


def test_a_stream_the_caller_stops_reading_ends_and_the_next_call_works(swap: Swap) -> None:
    with swap.client(max_retries=0) as client:
        stream = client.chat.completions.create(model="gpt-4", messages=MESSAGES, stream=True)
        first = next(iter(stream))
        stream.close()  # a product that read enough
        assert first.choices[0].delta.content is not None
        for _ in range(2):  # a stream again, on the worker that served the one left unread
            assert _ask(client, stream=True)[0] == ANSWER
    assert swap.proxy.sockets == 0
    # The abandoned answer's connection was closed, not reused: no request was sent twice.
    assert [r.path for r in swap.fake.requests] == ["/v1/chat/completions"] * 3


def test_the_client_times_and_closes_a_plain_answer_as_one_off_a_connection(swap: Swap) -> None:
    with swap.client(max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(model="gpt-4", messages=MESSAGES)
        assert raw.elapsed.total_seconds() >= 0
        assert raw.headers["content-length"] == str(len(raw.content))
        with client.chat.completions.with_streaming_response.create(
            model="gpt-4", messages=MESSAGES
        ) as streamed:
            assert ANSWER in b"".join(streamed.iter_bytes()).decode()
    assert swap.proxy.workers.started == 0  # both served in the caller's thread


def test_served_in_place_the_callers_own_timeout_still_ends_the_call() -> None:
    """A model that keeps sending tokens never trips its own ``timeout_s``; over the socket the
    caller's read timeout would end such a call, so in place its deadline does, and the call is
    recorded as unanswered (the product never saw an answer)."""
    slow = FakeOpenAI(ANSWER, latency_s=3.0, ttft_s=0.0)  # a token every 0.3 s or so
    with slow, contextlib.closing(_swap(slow, local=True)) as swaps:
        swap = next(swaps)
        with (
            swap.client(max_retries=0, timeout=1.0) as client,
            pytest.raises(openai.APITimeoutError),
        ):
            client.chat.completions.create(model="gpt-4", messages=MESSAGES)
        assert swap.proxy.workers.started == 0  # in place
        [call] = swap.ctx.calls
        assert call.error_kind == "timeout" and not call.text
        assert "the caller gave up (its own timeout of 1 s) before model 'cand'" in (
            call.error or ""
        )


def test_calls_from_threads_are_each_answered_and_recorded(swap: Swap) -> None:
    with swap.client(max_retries=0) as client, concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _ask(client, stream=False)[0], range(16)))
    assert answers == [ANSWER] * 16
    assert len(swap.ctx.calls) == 16
    assert swap.proxy.sockets == 0


def test_a_request_without_the_run_secret_goes_to_the_socket_and_is_refused(swap: Swap) -> None:
    origin = swap.proxy.origin
    c = openai.OpenAI(base_url=f"{origin}/not-the-secret/v1", api_key="sk-x", max_retries=0)
    with c, pytest.raises(openai.AuthenticationError):
        c.chat.completions.create(model="gpt-4", messages=MESSAGES)
    assert swap.proxy.sockets == 1
    assert swap.ctx.calls == []


def test_a_fault_in_serving_is_one_line_and_a_broken_connection_for_the_caller(
    swap: Swap, capfd: pytest.CaptureFixture[str]
) -> None:
    swap.router.golden = _Golden()  # its reference route breaks
    ref = openai.OpenAI(base_url=swap.proxy.url_for("ref"), api_key="sk-x", max_retries=0)
    with ref, pytest.raises(openai.APIConnectionError):
        ref.chat.completions.create(model="gpt-4", messages=MESSAGES)
    err = capfd.readouterr().err
    assert err.count("pytest-slam: the swap proxy dropped a call") == 1
    assert "reference store unreadable" in err and "Traceback" not in err


# -- asyncio callers: the same answers, in memory, while their event loop runs on ------------------


def _async_client(swap: Swap, **kw: object) -> openai.AsyncOpenAI:
    kw.setdefault("max_retries", 0)
    return openai.AsyncOpenAI(base_url=swap.proxy.base_url, api_key="sk-product", **kw)  # type: ignore[arg-type]


async def _ask_coroutine(swap: Swap, stream: bool, **kw: object) -> tuple[str, str | None]:
    async with _async_client(swap, **kw) as client:
        if stream:
            chunks = await client.chat.completions.create(
                model="gpt-4", messages=MESSAGES, stream=True
            )
            parts = [c.choices[0].delta.content or "" async for c in chunks if c.choices]
            return "".join(parts), None
        reply = await client.chat.completions.create(model="gpt-4", messages=MESSAGES)
        return reply.choices[0].message.content or "", reply.choices[0].finish_reason


def _ask_async(swap: Swap, stream: bool, **kw: object) -> tuple[str, str | None]:
    return asyncio.run(_ask_coroutine(swap, stream, **kw))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_asyncio_call_is_answered_and_recorded_without_a_socket(
    swap: Swap, stream: bool
) -> None:
    text, finish = _ask_async(swap, stream)
    assert (text, finish in (None, "stop")) == (ANSWER, True)
    assert swap.proxy.sockets == 0  # in memory, as a sync client's call
    assert swap.proxy.workers.started == 1  # never in the caller's thread: its loop runs on
    [call] = swap.ctx.calls
    assert (call.text, call.model, call.streamed, call.error) == (ANSWER, "cand", stream, None)
    assert call.ttft_ms is not None and swap.fake.requests[-1].json["stream"] is True


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_asyncio_answer_is_the_one_the_socket_gives(fake: FakeOpenAI, stream: bool) -> None:
    seen = []
    for local in (True, False):
        with contextlib.closing(_swap(fake, local)) as swaps:
            swap = next(swaps)

            async def raw_answer(swap: Swap = swap) -> tuple[int, str | None, object]:
                async with _async_client(swap) as client:
                    raw = await client.chat.completions.with_raw_response.create(
                        model="gpt-4", messages=MESSAGES, stream=stream, logprobs=True
                    )
                    parsed = raw.parse()  # the legacy raw response parses synchronously
                    if stream:
                        body: object = [
                            c.model_dump(exclude={"id", "created"}) async for c in parsed
                        ]
                    else:
                        body = parsed.model_dump(exclude={"id", "created"})
                    return raw.status_code, raw.headers.get("content-type"), body

            seen.append(asyncio.run(raw_answer()))
            assert swap.proxy.sockets == (0 if local else 1)
    assert seen[0] == seen[1]


def test_the_event_loop_runs_on_while_an_asyncio_call_waits() -> None:
    """The exchange's blocking upstream call runs on a worker: other tasks of the caller's loop run
    while it waits (a call served in the loop's thread would hold them until it ended)."""
    slow = FakeOpenAI(ANSWER, latency_s=1.0)
    order: list[str] = []
    with slow, contextlib.closing(_swap(slow, local=True)) as swaps:
        swap = next(swaps)

        async def call() -> None:
            async with _async_client(swap) as client:
                await client.chat.completions.create(model="gpt-4", messages=MESSAGES)
            order.append("call")

        async def other() -> None:  # runs while the candidate has the call, or after it
            for _ in range(1000):
                if swap.ctx.flights:
                    order.append("other")
                    return
                await asyncio.sleep(0.01)

        async def both() -> None:
            await asyncio.gather(call(), other())

        asyncio.run(both())
        assert order == ["other", "call"] and swap.proxy.sockets == 0  # blocked: ["call"]
        assert [c.text for c in swap.ctx.calls] == [ANSWER]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_asyncio_caller_that_gives_up_leaves_a_failed_call(stream: bool) -> None:
    slow = FakeOpenAI(ANSWER, latency_s=1.5, ttft_s=1.0)
    with slow, contextlib.closing(_swap(slow, local=True)) as swaps:
        swap = next(swaps)
        with pytest.raises(openai.APITimeoutError):
            _ask_async(swap, stream, timeout=0.2)
        wait_for(lambda: swap.ctx.calls, 10, "the abandoned call to end")
        [call] = swap.ctx.calls
        assert call.error_kind == "timeout" and not call.ok and swap.proxy.sockets == 0


def test_a_cancelled_asyncio_call_is_a_failed_call_and_the_loop_is_not_held() -> None:
    slow = FakeOpenAI(ANSWER, latency_s=1.0)
    with slow, contextlib.closing(_swap(slow, local=True)) as swaps:
        swap = next(swaps)

        async def cancelled() -> None:
            async with _async_client(swap) as client:
                task = asyncio.ensure_future(
                    client.chat.completions.create(model="gpt-4", messages=MESSAGES)
                )
                for _ in range(1000):  # until the candidate has the request, however busy
                    if swap.ctx.flights:
                        break
                    await asyncio.sleep(0.01)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

        asyncio.run(cancelled())
        wait_for(lambda: swap.ctx.calls, 10, "the cancelled call to end")
        [call] = swap.ctx.calls
        assert call.error_kind == "timeout" and "the caller gave up" in (call.error or "")


def test_an_asyncio_stream_the_caller_stops_reading_ends_and_the_next_call_works(
    swap: Swap,
) -> None:
    async def read_one_then_more() -> list[str]:
        async with _async_client(swap) as client:
            stream = await client.chat.completions.create(
                model="gpt-4", messages=MESSAGES, stream=True
            )
            first = await stream.__anext__()
            await stream.close()  # a product that read enough
            assert first.choices[0].delta.content is not None
        return [(await _ask_coroutine(swap, stream=True))[0] for _ in range(2)]

    assert asyncio.run(read_one_then_more()) == [ANSWER, ANSWER]
    assert swap.proxy.sockets == 0
    assert [r.path for r in swap.fake.requests] == ["/v1/chat/completions"] * 3


def test_an_upstream_error_reaches_an_asyncio_caller_with_its_status_and_advice() -> None:
    limited = FakeOpenAI(ANSWER, fail=[429] * (THROTTLE_RETRIES + 1), retry_after_s=0.001)
    with limited, contextlib.closing(_swap(limited, local=True)) as swaps:
        swap = next(swaps)
        with pytest.raises(openai.RateLimitError) as caught:
            _ask_async(swap, stream=False)
        assert caught.value.status_code == 429
        assert caught.value.response.headers.get("retry-after")
        assert _ask_async(swap, stream=False)[0] == ANSWER
        assert [c.error_kind for c in swap.ctx.calls] == ["http", None]
        assert swap.proxy.sockets == 0


def test_the_bypass_for_the_plugins_own_calls_keeps_the_socket(swap: Swap) -> None:
    with redirect.bypass(), swap.client(max_retries=0) as client:
        assert _ask(client, stream=False)[0] == ANSWER
    assert swap.proxy.sockets == 1


def test_a_process_with_over_a_thousand_files_open_is_still_answered_over_the_socket(
    swap: Swap,
) -> None:
    """A big suite can hold 1,024 files open: the proxy's look at whether its caller had left
    used ``select``, which refuses a socket numbered past that, and every call over the socket
    was recorded as its caller's timeout (an xdist worker of this suite did so in CI)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this machine allows {hard} open files; the test needs 1,200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY)]
    try:
        while held[-1] < 1100:  # every number below taken: the next sockets are numbered past it
            held.append(os.open(os.devnull, os.O_RDONLY))
        with redirect.bypass(), swap.client(max_retries=0) as client:
            assert _ask(client, stream=False)[0] == ANSWER
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    [call] = swap.ctx.calls
    assert swap.proxy.sockets == 1 and call.error is None


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_calls_golden_key_is_computed_once_and_kept_on_its_record(
    swap: Swap, stream: bool
) -> None:
    """The golden steps before the call (the cap's reference length, the replay miss) and the
    pairing after it share one key, computed once when the call is sent; it stays in this
    process (never in a report or on an xdist report)."""
    from pytest_slam.golden.keys import request_key

    golden = swap.router.golden = _Golden()
    keyed, handed = golden.keyed, golden.handed
    with swap.client(max_retries=0) as client:
        text, _ = _ask(client, stream)
    assert text == ANSWER
    [call] = swap.ctx.calls
    assert keyed == [request_key(call.request)]  # once, from the request as recorded
    assert handed == [("cap", keyed[0]), ("miss", keyed[0])]
    assert call.request_key == keyed[0]
    assert "request_key" not in call.as_dict()


def test_a_test_not_paired_with_goldens_keys_no_call(swap: Swap) -> None:
    """``slm(reference=False)``: no golden step runs for its calls, so none is keyed."""
    golden = swap.router.golden = _Golden()
    keyed = golden.keyed
    swap.ctx.paired = False
    with swap.client(max_retries=0) as client:
        text, _ = _ask(client, stream=False)
    assert text == ANSWER
    assert keyed == [] and swap.ctx.calls[0].request_key is None
