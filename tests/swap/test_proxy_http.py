"""Strict HTTP at the swap proxy: malformed requests get a 4xx, and the proxy keeps serving.

A real SwapProxy (h11 underneath) in front of a FakeOpenAI that stands in for the product's own
upstream; requests are written byte by byte on raw sockets, as a broken or hostile client would.
"""

from __future__ import annotations

import json
import select
import socket
from collections.abc import Iterator

import openai
import pytest
from patience import patient
from slam_helpers import swap_proxy

from pytest_slam.swap.proxy import SwapProxy
from pytest_slam.testing import FakeOpenAI

BODY = json.dumps({"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}).encode()


@pytest.fixture
def upstream() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(answer="from upstream") as fake:
        yield fake


@pytest.fixture
def proxy(upstream: FakeOpenAI) -> Iterator[SwapProxy]:
    with swap_proxy(upstream.base_url, idle_s=0.5, body_limit=100_000) as server:
        yield server


def exchange(proxy: SwapProxy, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection; everything the proxy says until it closes."""
    with socket.create_connection(proxy.server_address, timeout=patient(30)) as sock:
        sock.sendall(data)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
        return out


def status(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


def post(proxy: SwapProxy, headers: bytes, body: bytes = b"", path: bytes = b"") -> bytes:
    path = path or f"/{proxy.secret}/v1/chat/completions".encode()
    return b"POST %s HTTP/1.1\r\nHost: x\r\n%s\r\n%s" % (path, headers, body)


def still_serves(proxy: SwapProxy) -> None:
    client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-caller", max_retries=0)
    reply = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "q"}]
    )
    assert reply.choices[0].message.content == "from upstream"


MALFORMED = {
    "not HTTP": (b"HELLO\r\n\r\n", 400),
    "Content-Length not a number": (b"Content-Length: abc\r\n", 400),
    "negative Content-Length": (b"Content-Length: -5\r\n", 400),
    "two Content-Lengths": (b"Content-Length: 5\r\nContent-Length: 6\r\n", 400),
    "huge Content-Length": (b"Content-Length: 1000000000000000\r\n", 413),
    "Content-Length with chunked": (b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400),
    "headers over the limit": (b"X-Big: " + b"a" * 70_000 + b"\r\n", 431),
    "bad chunk size": (b"Transfer-Encoding: chunked\r\n", 400),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_each_malformed_request_gets_a_4xx_and_the_proxy_keeps_serving(
    proxy: SwapProxy, upstream: FakeOpenAI, case: str
) -> None:
    headers, expected = MALFORMED[case]
    data = headers if case == "not HTTP" else post(proxy, headers, b"zz\r\nxx\r\n0\r\n\r\n")
    reply = exchange(proxy, data)
    assert status(reply) == expected, reply[:200]
    assert b"pytest-slam" in reply  # an OpenAI-style error body the SDK shows as one line
    assert upstream.hits == 0  # nothing went upstream
    still_serves(proxy)


def test_a_head_that_never_ends_is_refused_at_the_limit(proxy: SwapProxy) -> None:
    head = f"POST /{proxy.secret}/v1/chat/completions HTTP/1.1\r\nX-Big: ".encode()
    reply = exchange(proxy, head + b"a" * 100_000)  # no end of headers, ever
    assert status(reply) == 431
    still_serves(proxy)


def test_a_body_over_the_limit_is_413_whether_sized_or_chunked(
    proxy: SwapProxy, upstream: FakeOpenAI
) -> None:
    big = b"x" * 150_000
    sized = exchange(proxy, post(proxy, b"Content-Length: %d\r\n" % len(big), big))
    chunked = b"".join(
        b"%x\r\n%s\r\n" % (20_000, big[i : i + 20_000]) for i in range(0, 140_000, 20_000)
    )
    streamed = exchange(proxy, post(proxy, b"Transfer-Encoding: chunked\r\n", chunked))
    assert (status(sized), status(streamed)) == (413, 413)
    assert upstream.hits == 0
    still_serves(proxy)


def test_a_chunked_body_is_read_whole_and_forwarded_once(
    proxy: SwapProxy, upstream: FakeOpenAI
) -> None:
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (BODY[:10], BODY[10:]))
    reply = exchange(
        proxy,
        post(proxy, b"Transfer-Encoding: chunked\r\nConnection: close\r\n", chunks + b"0\r\n\r\n"),
    )
    assert status(reply) == 200
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["choices"][0]["message"]["content"] == (
        "from upstream"
    )
    assert [r.json for r in upstream.requests] == [json.loads(BODY)]


def test_expect_100_continue_is_answered_before_the_body(
    proxy: SwapProxy, upstream: FakeOpenAI
) -> None:
    with socket.create_connection(proxy.server_address, timeout=patient(30)) as sock:
        head = b"Content-Length: %d\r\nExpect: 100-continue\r\nConnection: close\r\n" % len(BODY)
        sock.sendall(post(proxy, head))
        assert sock.recv(100).startswith(b"HTTP/1.1 100 ")
        sock.sendall(BODY)
        assert status(sock.recv(65536)) == 200
    assert upstream.hits == 1


def test_a_passthrough_stream_is_relayed_chunk_by_chunk(proxy: SwapProxy) -> None:
    client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-caller", max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "q"}], stream=True
    )
    pieces = [
        c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content
    ]
    assert "".join(pieces) == "from upstream" and len(pieces) > 1


def test_keep_alive_serves_requests_in_turn_on_one_connection(proxy: SwapProxy) -> None:
    with socket.create_connection(proxy.server_address, timeout=patient(30)) as sock:
        for _ in range(3):
            sock.sendall(post(proxy, b"Content-Length: %d\r\n" % len(BODY), BODY))
            reply = sock.recv(65536)
            assert status(reply) == 200 and b"from upstream" in reply


def test_an_unfinished_request_times_out_with_408_and_an_idle_one_is_closed(
    proxy: SwapProxy,
) -> None:
    partial = exchange(proxy, f"POST /{proxy.secret}/v1/chat/completions HTTP/1.1\r\n".encode())
    no_body = exchange(proxy, post(proxy, b"Content-Length: 10\r\n", b"{"))
    idle = exchange(proxy, b"")  # connects, says nothing
    assert (status(partial), status(no_body), idle) == (408, 408, b"")
    still_serves(proxy)


@pytest.mark.parametrize(
    ("request_line", "body", "expected"),
    [
        (b"PUT /{secret}/v1/chat/completions HTTP/1.1", BODY, 405),
        (b"POST /{secret}/v2/chat/completions HTTP/1.1", BODY, 404),
        (b"POST /{secret}/slam/m/nope/v1/chat/completions HTTP/1.1", BODY, 404),
        (b"POST /{secret}/slam/m/cand/v1/chat/completions HTTP/1.1", b"abc", 400),  # not JSON
        (b"POST /{secret}/slam/m/cand/v1/chat/completions HTTP/1.1", b"[1]", 400),  # not an object
    ],
)
def test_requests_the_proxy_cannot_serve_get_a_4xx(
    proxy: SwapProxy, request_line: bytes, body: bytes, expected: int
) -> None:
    line = request_line.replace(b"{secret}", proxy.secret.encode())
    head = b"\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    reply = exchange(proxy, line + head + body)
    assert status(reply) == expected, reply[:300]
    still_serves(proxy)


@pytest.mark.parametrize("part", ["head", "body"])
def test_a_request_trickled_in_is_cut_off_at_its_deadline(upstream: FakeOpenAI, part: str) -> None:
    """A byte every 0.05 s never lets the idle time (5 s) run out; the whole request's deadline
    (0.5 s here, ``SwapProxy(request_s=...)``) ends it with a 408 while bytes are still unsent."""
    with swap_proxy(upstream.base_url, idle_s=5.0, request_s=0.5) as proxy:
        head = post(proxy, b"Content-Length: %d\r\n" % len(BODY))
        sent, trickle = (b"", head + BODY) if part == "head" else (head, BODY)
        with socket.create_connection(proxy.server_address, timeout=patient(30)) as sock:
            sock.sendall(sent)
            unsent = len(trickle)
            for byte in trickle:
                if select.select([sock], [], [], 0.05)[0]:
                    break  # the proxy answered
                sock.sendall(bytes([byte]))
                unsent -= 1
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        assert unsent > 0  # answered before the request was whole
        assert status(reply) == 408 and b"not sent whole within 0.5 s" in reply
        still_serves(proxy)


NESTED = """
import os
import urllib.error
import urllib.request
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slm


def test_nested():
    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    deep = urllib.request.Request(url, data=b"[" * 60000, method="POST")
    deep.add_header("Content-Type", "application/json")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(deep, timeout=30)
    text = refused.value.read().decode()
    assert refused.value.code == 400 and "request body is not JSON" in text, text
    r = OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "hi"}], max_tokens=6)
    assert r.choices[0].message.content == "from the candidate"
"""


def test_a_swapped_request_nested_past_the_parser_is_a_400(pytester: pytest.Pytester) -> None:
    with FakeOpenAI(answer="from the candidate") as candidate:
        pytester.makepyfile(test_nested=NESTED)
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
candidates = ["cand"]
reference = "none"

[tool.slam.models.cand]
base_url = "{candidate.base_url}"
""")  # fmt: skip
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_stop_ends_the_serve_thread_and_closes_the_port(upstream: FakeOpenAI) -> None:
    """``stop`` wakes the serving thread instead of waiting for a poll; nothing is left serving."""
    with swap_proxy(upstream.base_url) as server:
        still_serves(server)
        thread = server._thread
        assert thread is not None and thread.is_alive()
    assert not thread.is_alive()  # joined by stop, not left to die with the process
    with pytest.raises(OSError):
        socket.create_connection(server.server_address, timeout=5).close()
    server.stop()  # a second stop (an interrupted start-up path) is harmless
