"""A kept-alive upstream connection takes each call's own timeout: its socket kept the timeout of
the call that opened it, so a model's (or the judge's) ``timeout_s`` was ignored on every later
call to the same server on that thread."""

from __future__ import annotations

import time

import pytest
from slam_helpers import silent_port

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


def _slow(request: dict[str, object]) -> str:
    time.sleep(1)  # before any byte of the answer: longer than the connect timeout below
    return "ok"


def test_no_connection_fails_within_the_sdks_connect_timeout_and_an_answer_gets_the_calls_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host that drops the SYN is unreachable after the connect timeout (the openai SDK's 5 s,
    shortened here), not after the model's whole ``timeout_s`` (600 s by default); a connection
    made then waits for its answer with the call's own timeout."""
    monkeypatch.setattr(upstream, "CONNECT_TIMEOUT_S", 0.3)
    with silent_port() as port, pytest.raises(upstream.UpstreamConnectTimeout) as caught:
        upstream.post(f"http://127.0.0.1:{port}/v1", "/chat/completions", _body("x"), None, 60.0)
    assert str(caught.value) == "no connection within 0.3 s"
    with FakeOpenAI(_slow) as server:  # answers after 1 s: within 60 s, not within 0.3 s
        answer = upstream.post(server.base_url, "/chat/completions", _body("x"), None, 60.0)
        assert answer.status == 200
        answer.read()
