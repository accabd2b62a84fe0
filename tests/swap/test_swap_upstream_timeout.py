"""A kept-alive upstream connection takes each call's own timeout: its socket kept the timeout of
the call that opened it, so a model's (or the judge's) ``timeout_s`` was ignored on every later
call to the same server on that thread."""

from __future__ import annotations

import time

import pytest

from pytest_slam.swap import upstream
from pytest_slam.testing import FakeOpenAI


def _slow_when_asked(request: dict[str, object]) -> str:
    if "slow" in str(request["messages"]):
        time.sleep(3)  # before any byte of the answer
    return "ok"


def _body(content: str) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": content}]}


def test_a_reused_connection_honours_the_next_calls_shorter_timeout() -> None:
    with FakeOpenAI(_slow_when_asked) as server:
        first = upstream.post(server.base_url, "/chat/completions", _body("fast"), None, 60.0)
        assert first.status == 200
        first.read()  # the connection stays open for this thread's next call
        with pytest.raises(upstream.UpstreamTimeout):
            upstream.post(server.base_url, "/chat/completions", _body("slow"), None, 0.5)
