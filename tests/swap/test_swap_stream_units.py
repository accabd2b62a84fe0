"""The swap's stream and route parsing as plain units: no socket, no server, no thread.

The SSE reader (``upstream.Response.events``), the chunk accumulator (``chat.Accumulator``) and the
proxy's route parsing (``proxy.split_route``) are exercised end to end by the loopback tests; here
each is fed exactly the bytes or chunks that make its edge cases, so a failure names the unit.
"""

from __future__ import annotations

import io
from typing import Any, cast

import pytest

from pytest_slam.swap.chat import Accumulator
from pytest_slam.swap.proxy import RouteError, split_route
from pytest_slam.swap.upstream import Response


class Blocks(io.RawIOBase):
    """A response body that arrives in the given pieces, as a socket hands them over."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)

    def read1(self, size: int = -1) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        rest, self.pieces = b"".join(self.pieces), []
        return rest


def events(pieces: list[bytes]) -> tuple[list[bytes], Response]:
    resp = Response(200, {"content-type": "text/event-stream"}, cast(Any, Blocks(pieces)))
    return list(resp.events()), resp


def test_events_are_the_data_payloads_however_the_bytes_are_split() -> None:
    body = b'data: {"a": 1}\n\n: a comment\nevent: chunk\ndata: {"b": 2}\r\n\r\ndata: [DONE]\n\n'
    whole, resp = events([body])
    assert whole == [b'{"a": 1}', b'{"b": 2}'] and resp.done
    for cut in range(1, len(body)):  # every place a read may end, a line's middle included
        split, resp = events([body[:cut], body[cut:]])
        assert (split, resp.done) == (whole, True), cut


def test_a_stream_that_ends_without_done_is_said_so_and_keeps_its_last_line() -> None:
    got, resp = events([b'data: {}\n\ndata: {"last": true}'])
    assert got == [b"{}", b'{"last": true}']
    assert not resp.done  # the caller's check for a truncated stream reads this


def test_done_leaves_nothing_of_the_body_unread() -> None:
    raw = Blocks([b"data: {}\n\ndata: [DONE]\n\n", b"0\r\n\r\n"])
    resp = Response(200, {}, cast(Any, raw))
    assert list(resp.events()) == [b"{}"] and resp.done
    assert raw.pieces == []  # the kept-alive connection is ready for the next request


def chunk(content: str | None = None, index: int = 0, **more: Any) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    delta.update(more.pop("delta", {}))
    choice = {"index": index, "delta": delta, **more.pop("choice", {})}
    return {"id": "c1", "model": "m", "choices": [choice], **more}


def test_the_accumulator_joins_text_and_times_first_and_last_content() -> None:
    acc = Accumulator(start=10.0)
    acc.feed(chunk(delta={"role": "assistant"}), 10.1)  # no content yet: not the first token
    acc.feed(chunk("Hel"), 10.2)
    acc.feed(chunk("lo"), 10.3)
    acc.feed(chunk(choice={"finish_reason": "stop"}, usage={"completion_tokens": 2}), 10.4)
    assert acc.text() == "Hello" and acc.pieces == 2
    assert acc.ms(acc.first) == pytest.approx(200.0) and acc.ms(acc.last) == pytest.approx(400.0)
    assert acc.usage == {"completion_tokens": 2}
    completion = acc.completion()
    assert completion["id"] == "c1" and completion["model"] == "m"
    assert completion["choices"][0]["message"]["content"] == "Hello"
    assert completion["choices"][0]["finish_reason"] == "stop"


def test_the_accumulator_builds_tool_calls_from_their_pieces_and_keeps_choices_apart() -> None:
    acc = Accumulator(start=0.0)
    call = {"index": 0, "id": "t1", "function": {"name": "refund", "arguments": '{"id": '}}
    acc.feed(chunk(delta={"tool_calls": [call]}), 1.0)
    acc.feed(chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": "7}"}}]}), 2.0)
    acc.feed(chunk("other", index=1), 3.0)
    [first, second] = acc.summaries()
    assert first["tool_calls"] == [
        {"id": "t1", "type": "function", "function": {"name": "refund", "arguments": '{"id": 7}'}}
    ]
    assert first["text"] == "" and second["text"] == "other"
    message = acc.completion()["choices"][0]["message"]
    assert message["content"] is None  # only tool calls: null content, as the API sends it
    assert acc.ms(acc.first) == pytest.approx(1000.0)  # a tool call's piece is a first token too


@pytest.mark.parametrize(
    ("path", "route", "rest"),
    [
        ("/v1/chat/completions", "", "/chat/completions"),
        ("/v1/chat/completions?x=1", "", "/chat/completions"),
        ("/slam/m/qwen/v1/chat/completions", "m/qwen", "/chat/completions"),
        ("/slam/ref/v1/embeddings", "ref", "/embeddings"),
    ],
)
def test_routes_are_parsed_from_the_path(path: str, route: str, rest: str) -> None:
    assert split_route(path) == (route, rest)


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/slam/m/qwen/chat/completions", "no such route under /slam/"),
        ("/chat/completions", "serves /v1/... only"),
    ],
)
def test_a_path_the_proxy_does_not_serve_is_a_404_saying_why(path: str, said: str) -> None:
    with pytest.raises(RouteError) as err:
        split_route(path)
    assert err.value.status == 404 and said in str(err.value)
