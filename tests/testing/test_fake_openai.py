"""The loopback OpenAI server, driven by the real ``openai`` client (sync, async, streaming)."""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from patience import patient

from pytest_slam.testing import FakeOpenAI, count_tokens

ANSWER = "The ticket is about a billing error, so route it to the payments team."
MESSAGES = [{"role": "user", "content": "Hello there, friend!"}]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(ANSWER) as server:
        yield server


def client_for(fake: FakeOpenAI, **kw: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.base_url, api_key="sk-test", **kw)


def test_chat_completion_is_a_real_chat_completion(fake: FakeOpenAI) -> None:
    with client_for(fake) as client:
        reply = client.chat.completions.create(model="gpt-4", messages=MESSAGES)
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-")
    assert reply.model == "gpt-4-0613" and reply.system_fingerprint
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content == ANSWER
    assert reply.choices[0].finish_reason == "stop"
    # Prompt: 3 + 4 per message + "Hello there , friend !" (5); completion: the estimate.
    assert reply.usage is not None and reply.usage.prompt_tokens == 12
    assert reply.usage.completion_tokens == count_tokens(ANSWER)
    assert reply.usage.total_tokens == 12 + count_tokens(ANSWER)
    (request,) = fake.requests
    assert fake.hits == 1 and request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json["messages"] == MESSAGES and request.json["model"] == "gpt-4"


def test_stream_with_usage_is_shaped_like_openai(fake: FakeOpenAI) -> None:
    with client_for(fake) as client:
        stream = client.chat.completions.create(
            model="gpt-4", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    content = [c.choices[0].delta.content for c in chunks[1:-2]]
    assert len(content) > 3 and "".join(content) == ANSWER
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-2])
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == count_tokens(ANSWER)
    assert all(c.usage is None for c in chunks[:-1])


def test_stream_without_include_usage_sends_no_usage_chunk(fake: FakeOpenAI) -> None:
    with client_for(fake) as client:
        chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None and c.choices for c in chunks)


def test_async_client_plain_and_streaming(fake: FakeOpenAI) -> None:
    async def run() -> tuple[str | None, str]:
        async with openai.AsyncOpenAI(base_url=fake.base_url, api_key="sk-test") as client:
            reply = await client.chat.completions.create(model="gpt-4", messages=MESSAGES)
            stream = await client.chat.completions.create(
                model="gpt-4", messages=MESSAGES, stream=True
            )
            text = "".join([c.choices[0].delta.content or "" async for c in stream])
        return reply.choices[0].message.content, text

    assert asyncio.run(run()) == (ANSWER, ANSWER)
    assert fake.hits == 2


@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_truncates_with_finish_reason_length(fake: FakeOpenAI, param: str) -> None:
    with client_for(fake) as client:
        reply = client.chat.completions.create(model="m", messages=MESSAGES, **{param: 4})
        chunks = list(
            client.chat.completions.create(model="m", messages=MESSAGES, stream=True, **{param: 4})
        )
    assert reply.choices[0].message.content == "The ticket is about"
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 4
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "The ticket is about"
    assert chunks[-1].choices[0].finish_reason == "length"


def test_callable_answer_sees_the_request_and_can_call_tools() -> None:
    def answer(request: dict) -> dict:
        city = request["messages"][-1]["content"]
        return {
            "content": None,
            "tool_calls": [{"function": {"name": "weather", "arguments": {"city": city}}}],
        }

    with FakeOpenAI(answer) as fake, client_for(fake) as client:
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Oslo"}]
        )
        chunks = list(
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Rome"}], stream=True
            )
        )
    (call,) = reply.choices[0].message.tool_calls or []
    assert (
        reply.choices[0].finish_reason == "tool_calls" and reply.choices[0].message.content is None
    )
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "weather" and json.loads(call.function.arguments) == {
        "city": "Oslo"
    }
    streamed = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()]
    assert [json.loads(tc.function.arguments) for tc in streamed] == [{"city": "Rome"}]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_broken_answer_callable_is_a_500_that_names_it() -> None:
    with FakeOpenAI(lambda request: 42) as fake, client_for(fake, max_retries=0) as client:
        with pytest.raises(openai.InternalServerError, match="answer returned 42: return a str"):
            client.chat.completions.create(model="m", messages=MESSAGES)
        assert client.models.list().data  # still serving


def test_latency_and_ttft_are_at_least_what_was_asked() -> None:
    with FakeOpenAI(ANSWER, latency_s=0.25, ttft_s=0.1) as fake, client_for(fake) as client:
        start = time.perf_counter()
        client.chat.completions.create(model="m", messages=MESSAGES)
        plain_e2e = time.perf_counter() - start
        start = time.perf_counter()
        arrivals = [
            (time.perf_counter() - start, chunk)
            for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        ]
        stream_e2e = time.perf_counter() - start
    ttft = next(t for t, c in arrivals if c.choices and c.choices[0].delta.content)
    assert plain_e2e >= 0.25
    assert arrivals[0][0] >= 0.1 and ttft >= 0.1  # not even the role chunk comes early
    assert stream_e2e >= 0.25 and arrivals[-1][0] >= 0.25


def test_injected_failures_come_in_order_then_it_answers() -> None:
    with FakeOpenAI(ANSWER, fail=[429, 500]) as fake, client_for(fake, max_retries=0) as client:
        with pytest.raises(openai.RateLimitError) as rate_limited:
            client.chat.completions.create(model="m", messages=MESSAGES)
        with pytest.raises(openai.InternalServerError) as server_error:
            client.chat.completions.create(model="m", messages=MESSAGES)
        reply = client.chat.completions.create(model="m", messages=MESSAGES)
    assert rate_limited.value.status_code == 429
    assert rate_limited.value.response.headers["retry-after"] == "1"
    assert rate_limited.value.response.headers["retry-after-ms"] == "50"
    assert (
        rate_limited.value.code == "rate_limit_exceeded" and rate_limited.value.type == "requests"
    )
    assert server_error.value.status_code == 500 and server_error.value.type == "server_error"
    assert reply.choices[0].message.content == ANSWER and fake.hits == 3


def test_client_retries_a_429_after_retry_after() -> None:
    with FakeOpenAI(ANSWER, fail=[429, 429]) as fake, client_for(fake, max_retries=2) as client:
        reply = client.chat.completions.create(model="m", messages=MESSAGES)
    assert reply.choices[0].message.content == ANSWER and fake.hits == 3


def test_timeout_failure_times_the_client_out_then_recovers() -> None:
    fake = FakeOpenAI(ANSWER, fail=["timeout"], timeout_sleep_s=5.0)
    with fake, client_for(fake, max_retries=0, timeout=0.3) as client:
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="m", messages=MESSAGES)
        # A generous timeout for the recovery call: a loaded machine must not make it flaky.
        reply = client.with_options(timeout=30).chat.completions.create(
            model="m", messages=MESSAGES
        )
    assert reply.choices[0].message.content == ANSWER and fake.hits == 2


def test_wrong_api_key_is_an_authentication_error() -> None:
    fake = FakeOpenAI(ANSWER, api_key="sk-right")
    with (
        fake,
        client_for(fake, max_retries=0) as client,
        pytest.raises(openai.AuthenticationError) as error,
    ):
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert error.value.code == "invalid_api_key"


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_embeddings_put_similar_texts_closer(fake: FakeOpenAI) -> None:
    texts = [
        "refund my last invoice please",
        "please refund the invoice I paid last month",
        "the hiking trail closes at sunset",
    ]
    with client_for(fake) as client:
        reply = client.embeddings.create(model="text-embedding-3-small", input=texts)
        floats = client.embeddings.create(model="e", input=texts[0], encoding_format="float")
    vectors = [item.embedding for item in reply.data]  # the client asked for base64 float32
    assert fake.requests[0].json["encoding_format"] == "base64"
    assert [item.index for item in reply.data] == [0, 1, 2] and len(vectors[0]) == 256
    assert all(math.isclose(cosine(v, v), 1.0, rel_tol=1e-6) for v in vectors)
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2]) + 0.3
    assert floats.data[0].embedding == pytest.approx(vectors[0], abs=1e-6)
    assert math.isclose(cosine(floats.data[0].embedding, floats.data[0].embedding), 1.0)
    assert reply.model == "text-embedding-3-small" and reply.usage.prompt_tokens > 0


def test_embeddings_down_is_a_503() -> None:
    with FakeOpenAI(embeddings_down=True) as fake, client_for(fake, max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as error:
            client.embeddings.create(model="e", input="hello")
        assert client.chat.completions.create(model="m", messages=MESSAGES).choices
    assert error.value.status_code == 503


def test_models_lists_the_model(fake: FakeOpenAI) -> None:
    with client_for(fake) as client:
        assert [m.id for m in client.models.list()] == ["gpt-4-0613"]


def test_unknown_path_and_missing_parameter_are_openai_errors(fake: FakeOpenAI) -> None:
    with client_for(fake, max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as not_found:
            client.post("/no/such/thing", body={}, cast_to=object)
        with pytest.raises(openai.BadRequestError) as bad:
            client.post("/chat/completions", body={"model": "m"}, cast_to=object)
    assert not_found.value.message.endswith("Invalid URL (POST /v1/no/such/thing)")
    assert "'messages'" in bad.value.message and bad.value.type == "invalid_request_error"


def test_invalid_json_is_a_400_and_the_connection_stays_usable(fake: FakeOpenAI) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=patient(5))
    try:
        conn.request("POST", "/v1/chat/completions", body=b"{not json", headers={"X": "1"})
        response = conn.getresponse()
        error = json.loads(response.read())["error"]
        conn.request("POST", "/v1/embeddings", body=b"[1, 2]")
        not_an_object = conn.getresponse()
        not_an_object.read()
        conn.request("GET", "/v1/models")  # same socket: HTTP/1.1 keep-alive
        models = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    assert response.status == 400 and error["type"] == "invalid_request_error"
    assert not_an_object.status == 400
    assert "JSON" in error["message"] and models["data"][0]["id"] == "gpt-4-0613"
    assert fake.requests[0].json is None and fake.requests[0].headers["x"] == "1"


def test_stop_frees_the_port_and_drops_open_connections() -> None:
    fake = FakeOpenAI(ANSWER).start()
    port = fake.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=patient(5))
    try:
        conn.request("GET", "/v1/models")
        assert conn.getresponse().read()
        fake.stop()
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            conn.request("GET", "/v1/models")  # the kept-alive socket was closed by stop()
            conn.getresponse()
    finally:
        conn.close()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass
    with FakeOpenAI("again", port=port) as again, client_for(again) as client:
        reply = client.chat.completions.create(model="m", messages=MESSAGES)
    assert again.base_url == f"http://127.0.0.1:{port}/v1"
    assert reply.choices[0].message.content == "again"


def test_bad_failure_spec_names_the_fix() -> None:
    with pytest.raises(ValueError, match=r"fail=200: use a status 400-599 or 'timeout'"):
        FakeOpenAI(fail=[200])


def test_cli_prints_base_url_serves_and_stops_on_sigterm() -> None:
    command = [sys.executable, "-m", "pytest_slam.testing.fake_openai", "--port", "0"]
    command += ["--answer", "from the CLI", "--latency-ms", "5"]
    proc = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        with openai.OpenAI(base_url=base_url, api_key="sk-test") as client:
            reply = client.chat.completions.create(model="m", messages=MESSAGES)
        proc.terminate()
        _, stderr = proc.communicate(timeout=patient(10))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
    assert reply.choices[0].message.content == "from the CLI"
    assert proc.returncode == 0 and stderr == ""


def test_cli_port_in_use_is_one_readable_error(fake: FakeOpenAI) -> None:
    command = [sys.executable, "-m", "pytest_slam.testing.fake_openai", "--port", str(fake.port)]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=patient(30))
    assert result.returncode == 2 and result.stdout == ""
    assert f"cannot listen on 127.0.0.1:{fake.port}" in result.stderr
    assert "pick another --port, or 0" in result.stderr and "Traceback" not in result.stderr


def ask_at_once(fake: FakeOpenAI, count: int) -> list[str | None]:
    """``count`` chat requests from as many threads, each its own client; their answers."""
    answers: list[str | None] = [None] * count

    def ask(i: int) -> None:
        with client_for(fake, max_retries=0) as client:
            messages = [{"role": "user", "content": f"Request {i}"}]
            reply = client.chat.completions.create(model="m", messages=messages)
        answers[i] = reply.choices[0].message.content

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def queued_then_released(fake: FakeOpenAI, count: int) -> list[str | None]:
    """Queue ``count`` requests while the engine is held, then let it run: steps by count only."""
    fake.hold()
    done: list[list[str | None]] = []
    asker = threading.Thread(target=lambda: done.append(ask_at_once(fake, count)))
    asker.start()
    assert fake.wait_queued(count), "the requests never reached the engine's queue"
    fake.release()
    asker.join()
    return done[0]


def test_batching_engine_serves_up_to_b_requests_per_step() -> None:
    with FakeOpenAI(ANSWER, batch=4) as fake:
        answers = queued_then_released(fake, 10)
        assert fake.batches == [4, 4, 2] and fake.peak_batch == 4
        assert answers == [ANSWER] * 10
        # B requests take one step as 1 does; B + 1 take two.
        queued_then_released(fake, 4)
        assert fake.batches[3:] == [4]
        queued_then_released(fake, 5)
        assert fake.batches[4:] == [4, 1]
    assert fake.peak_in_flight == 10  # all were in the server at once; the engine took 4 a step


def test_batching_engine_holds_a_place_for_a_requests_steps() -> None:
    # 30 ms of 10 ms steps: a request holds its place 3 steps; the third waits for a free one.
    with FakeOpenAI(ANSWER, batch=2, latency_s=0.03, step_s=0.01) as fake:
        queued_then_released(fake, 3)
    assert fake.batches == [2, 2, 2, 1, 1, 1]


def test_batching_engine_streams_the_answer_once_its_steps_are_done() -> None:
    with FakeOpenAI(ANSWER, batch=2, latency_s=0.02, step_s=0.01) as fake, client_for(fake) as c:
        stream = c.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == ANSWER
    assert chunks[-1].usage is not None and fake.batches == [1, 1]


def test_default_mode_answers_every_request_at_once() -> None:
    together = threading.Barrier(5, timeout=patient(30))

    def answer(request: dict) -> str:
        together.wait()  # breaks (a 500) unless all five are being answered at the same time
        return ANSWER

    with FakeOpenAI(answer) as fake:
        assert ask_at_once(fake, 5) == [ANSWER] * 5
    assert fake.peak_in_flight == 5 and fake.batches == [] and fake.peak_batch == 0


def test_stop_releases_a_request_queued_in_the_batching_engine() -> None:
    fake = FakeOpenAI(ANSWER, batch=2).start()
    fake.hold()
    failed: list[BaseException] = []

    def ask() -> None:
        try:
            with client_for(fake, max_retries=0) as client:
                client.chat.completions.create(model="m", messages=MESSAGES)
        except openai.APIConnectionError as exc:
            failed.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    assert fake.wait_queued(1)
    fake.stop()
    asker.join(timeout=patient(30))
    assert not asker.is_alive() and len(failed) == 1 and fake.batches == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch": 0}, r"batch=0: use at least 1 request per step"),
        ({"step_s": 0.1}, r"step_s needs batch=B"),
        ({"batch": 2, "step_s": -1.0}, r"step_s must be >= 0 seconds"),
    ],
)
def test_bad_batching_settings_name_the_fix(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FakeOpenAI(**kwargs)


def test_hold_without_batching_says_what_it_needs(fake: FakeOpenAI) -> None:
    with pytest.raises(RuntimeError, match="need batch=B"):
        fake.hold()


def test_cli_batch_mode_serves_in_steps_and_reports_stats() -> None:
    command = [sys.executable, "-m", "pytest_slam.testing.fake_openai", "--port", "0"]
    command += ["--batch", "2", "--latency-ms", "20", "--step-ms", "10"]
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        root = base_url.removesuffix("/v1")
        with openai.OpenAI(base_url=base_url, api_key="sk-test") as client:
            for content in ("one", "two", "one"):
                messages = [{"role": "user", "content": content}]
                client.chat.completions.create(model="m", messages=messages)
            stats = client.get(f"{root}/fake/stats", cast_to=object)
            client.post(f"{root}/fake/stats/reset", cast_to=object)
            after = client.get(f"{root}/fake/stats", cast_to=object)
    finally:
        proc.terminate()
        proc.communicate(timeout=patient(10))
    # One at a time: each request held its place for two 10 ms steps, alone.
    assert stats == {"chat_requests": 3, "distinct_chat_bodies": 2, "peak_in_flight": 1,
                     "steps": 6, "peak_batch": 1}  # fmt: skip
    assert after == {"chat_requests": 0, "distinct_chat_bodies": 0, "peak_in_flight": 0,
                     "steps": 0, "peak_batch": 0}  # fmt: skip
