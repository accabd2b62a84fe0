"""A candidate that cannot be connected to reaches the product's SDK as a connection error.

Talking to a dead endpoint itself, the openai SDK raises ``APIConnectionError`` (``APITimeoutError``
when the connection does not come in time), and retries it; a product catches exactly that. Through
the swap the product got an HTTP 502 (``APIStatusError``) instead, so its own handling of a dead
endpoint was never exercised. Real pytest runs of a product with the real openai client: an
in-process client (served in memory, local.py), a stream, an asyncio client, a Responses API call
(translated to a chat call), and a client in a subprocess (over the loopback socket). The call
is still recorded as failed, unreachable, and the report says so.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import slam_helpers
from report_helpers import read_report
from slam_helpers import said, write_pyproject

from pytest_slam.run.inputs.options import EXIT_GATE_FAILED

PRODUCT = """
import asyncio, os, subprocess, sys
import openai

MESSAGES = [{"role": "user", "content": "How do I reset my password?"}]


async def _ask_async(options):
    async with openai.AsyncOpenAI(**options) as client:
        await client.chat.completions.create(model="gpt-4", messages=MESSAGES)


def ask(mode, **options):
    '''The name of the exception the SDK raised ('' when it answered).'''
    try:
        if mode == "async":
            asyncio.run(_ask_async(options))
        elif mode == "subprocess":  # a client in another process: over the loopback socket
            code = f"import product; print(product.ask('sync', **{options!r}))"
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            return done.stdout.strip() or done.stderr
        elif mode == "responses":  # translated to one chat call of the candidate
            openai.OpenAI(**options).responses.create(model="gpt-4", input="Reset my password?")
        else:
            openai.OpenAI(**options).chat.completions.create(
                model="gpt-4", messages=MESSAGES, stream=mode == "stream"
            )
    except openai.APIError as exc:
        return type(exc).__name__
    return ""
"""

TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("mode", ["sync", "stream", "async", "subprocess", "responses"])
def test_dead(mode):
    assert product.ask(mode, max_retries=0) == {expected!r}.get(mode, {expected!r}["sync"])

def test_retried():
    '''The SDK's own retries go as they go against the endpoint: each is a call.'''
    assert product.ask("sync", max_retries=1) == {expected!r}["sync"]
"""


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    with slam_helpers.silent_port() as port:
        yield port


def _run(
    pytester: pytest.Pytester, port: int, expected: dict[str, str], extra: str = ""
) -> dict[str, object]:
    pytester.makepyfile(product=PRODUCT, test_product=TESTS.format(expected=expected))
    write_pyproject(pytester, f"http://127.0.0.1:{port}/v1", extra=extra)
    result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
    result.assert_outcomes(passed=6)  # each test caught the error it expected
    assert result.ret == EXIT_GATE_FAILED, result.stdout.str()
    assert "mini: candidate_failed: unreachable: 6 of 6 tests" in said(result)
    report: dict[str, object] = read_report(pytester.path / "r.json")
    return report


def test_a_refused_connection_is_the_sdks_connection_error(
    pytester: pytest.Pytester, closed_port: int
) -> None:
    """Old code: ``InternalServerError`` (a 502) in every mode, and never retried."""
    report = _run(pytester, closed_port, {"sync": "APIConnectionError"})
    outcomes = report["outcomes"]
    assert isinstance(outcomes, list)
    calls = {o["test"].split("::")[-1]: o["calls"] for o in outcomes}
    modes = ("sync", "stream", "async", "subprocess", "responses")
    assert [len(calls[f"test_dead[{mode}]"]) for mode in modes] == [1, 1, 1, 1, 1]
    assert len(calls["test_retried"]) == 2  # the SDK asked again, as it would the endpoint
    for call in [c for test in calls.values() for c in test]:
        assert call["error_kind"] == "unreachable"
        assert call["error"].startswith(f"model 'mini' at http://127.0.0.1:{closed_port}/v1 is ")
        assert "unreachable (ConnectionRefusedError" in call["error"]
    for outcome in outcomes:
        assert "to mini failed (unreachable " in outcome["message"], outcome["message"]


def test_no_connection_in_time_is_the_sdks_timeout_error(
    pytester: pytest.Pytester, silent_port: int
) -> None:
    """A connection the model's ``timeout_s`` does not see made: ``APITimeoutError`` in process;
    over the socket the proxy can only hang up, which the SDK raises as a connection error."""
    expected = {"sync": "APITimeoutError", "subprocess": "APIConnectionError"}
    report = _run(pytester, silent_port, expected, extra="timeout_s = 0.5\n")
    outcomes = report["outcomes"]
    assert isinstance(outcomes, list)
    for outcome in outcomes:
        for call in outcome["calls"]:
            assert call["error_kind"] == "unreachable"
            assert "is unreachable (no connection within 0.5 s)" in call["error"]
