"""Candidate faults are one line per call, naming the model and the fault, never a traceback.

A small loopback server answers 200 with what broken engines send (a stream cut off, events that are
not JSON or not UTF-8, an error event, an HTML page); each is a model of a real pytest run (pytester),
called by product code through the SDK, streaming and not. Then the per-model timeout, against a
FakeOpenAI that takes its time.
"""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator

import openai
import pytest
from report_helpers import read_report
from slam_helpers import PRODUCT, swap_proxy

from pytest_slam.records import ModelSpec
from pytest_slam.swap import upstream
from pytest_slam.swap.chat import Target, forward_chat
from pytest_slam.testing import FakeOpenAI


def _event(content: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish}
    return b"data: " + json.dumps({"id": "x", "model": "m", "choices": [choice]}).encode() + b"\n\n"


def _chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)


SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
FAULTS = {  # model name -> (the whole reply, a phrase of the one line it must give)
    "cut": (SSE + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(_event("Hel")), "broke off"),
    "ended": (SSE + b"Connection: close\r\n\r\n" + _event("Hel"), "no [DONE] (truncated)"),
    "badjson": (
        SSE + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(b'data: {"choices": [{\n\n'),
        "not JSON",
    ),
    "latin1": (
        SSE
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + _chunked(b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xe9"}}]}\n\n'),
        "not UTF-8",
    ),
    "errevent": (
        SSE
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + _chunked(b'data: {"error": {"message": "CUDA out of memory"}}\n\n', b"data: [DONE]\n\n")
        + b"0\r\n\r\n",
        "CUDA out of memory",
    ),
    "html": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 24\r\n\r\n"
        + b"<html>Bad Gateway</html>",
        "neither an SSE stream nor a chat completion",
    ),
}


class _Faulty(socketserver.StreamRequestHandler):
    """Reads one request, answers the canned reply its path names, hangs up."""

    def handle(self) -> None:
        line = self.rfile.readline().decode()
        length = 0
        while (header := self.rfile.readline()) not in (b"\r\n", b""):
            name, _, value = header.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        self.rfile.read(length)
        model = line.split()[1].split("/")[1]
        self.wfile.write(FAULTS[model][0])


@pytest.fixture
def faulty() -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Faulty)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


SUITE = """
import openai, pytest, product

pytestmark = pytest.mark.slm

def test_plain():
    assert product.ask("Say hello") is not None

def test_stream():
    stream = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "Say hello"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
"""


def test_each_candidate_fault_is_one_line_naming_the_model(
    pytester: pytest.Pytester, faulty: str
) -> None:
    tables = "".join(f'[tool.slam.models.{m}]\nbase_url = "{faulty}/{m}/v1"\n' for m in FAULTS)
    pytester.makefile(
        ".toml",
        pyproject=f"[tool.slam]\nreference = 'none'\ncandidates = {list(FAULTS)!r}\n{tables}",
    )
    pytester.makepyfile(product=PRODUCT)  # the SDK's default retries: a fault says not to retry
    pytester.makepyfile(test_faults=SUITE)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--tb=line", "--slm-report=report.json",
        "-W", "error::pytest.PytestUnraisableExceptionWarning",
        "-W", "error::pytest.PytestUnhandledThreadExceptionWarning",
    )  # fmt: skip
    result.assert_outcomes(failed=2 * len(FAULTS))
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "dropped a connection" not in output
    for model, (_, fault) in FAULTS.items():
        lines = [line for line in output.splitlines() if f"model '{model}' at " in line]
        # One line per failed test (the plain and the streaming caller) in place of a traceback,
        # naming the model, the fault and what to check.
        # (--tb=line also prints pytest's own 50-character cut of that line: not counted.)
        ours = [line for line in lines if line.startswith(f"pytest-slam: model '{model}' at ")]
        whole = [line for line in ours if fault in line and "OpenAI protocol" in line]
        assert len(whole) == 2, (model, lines)
    outcomes = read_report(pytester.path / "report.json")["outcomes"]
    errors = {o["nodeid"]: [c["error"] for c in o["calls"]] for o in outcomes}
    assert len(errors) == 2 * len(FAULTS)
    assert all(len(e) == 1 and e[0].startswith("model '") for e in errors.values()), errors


def spec(base_url: str, timeout_s: float | None) -> ModelSpec:
    return ModelSpec("slow", "endpoint", "m", [base_url], timeout_s=timeout_s)


def test_the_candidate_timeout_is_the_models_own_and_defaults_to_600_s() -> None:
    assert upstream.timeout_for(spec("http://127.0.0.1:9/v1", None)) == 600.0
    with FakeOpenAI(fail=["timeout"], timeout_sleep_s=60) as silent:
        target = Target(spec(silent.base_url, 0.5), silent.base_url, None)
        result = forward_chat(
            target, {"model": "x", "messages": [{"role": "user", "content": "q"}]}
        )
    assert result.status == 504
    assert result.call.error == (
        f"model 'slow' at {silent.base_url} sent no answer within 0.5 s (its timeout_s)"
    )


def test_a_stream_that_stalls_past_the_timeout_is_a_fault_not_a_hang() -> None:
    answer = "one two three four"
    with FakeOpenAI(answer, latency_s=60, ttft_s=0) as slow:  # first chunk now, then long gaps
        target = Target(spec(slow.base_url, 0.5), slow.base_url, None)
        result = forward_chat(
            target, {"model": "x", "messages": [{"role": "user", "content": "q"}]}
        )
    assert result.status == 502
    assert "the stream stalled: nothing for 0.5 s after" in (result.call.error or "")


# -- a request goes out once ----------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_candidate_that_drops_the_connection_gets_the_post_once(stream: bool) -> None:
    """The hop never resends on its own: the caller said ``max_retries=0``, so one POST."""
    with FakeOpenAI(fail=["timeout"], timeout_sleep_s=0) as dropping:  # reads, then hangs up
        with swap_proxy(dropping.base_url) as proxy:
            client = openai.OpenAI(base_url=proxy.url_for("m/cand"), api_key="sk-x", max_retries=0)
            with client, pytest.raises(openai.APIStatusError) as caught:
                reply = client.chat.completions.create(
                    model="gpt-4", messages=[{"role": "user", "content": "q"}], stream=stream
                )
                if stream:
                    list(reply)
        assert dropping.hits == 1
    assert caught.value.status_code == 502
    assert "is unreachable (RemoteDisconnected" in caught.value.message


def test_a_passthrough_post_reaches_the_upstream_once() -> None:
    """Outside an opted-in test a POST (an upload here) is relayed as is, and once."""
    with FakeOpenAI(fail=["timeout"], timeout_sleep_s=0) as dropping:
        with swap_proxy(dropping.base_url) as proxy:
            client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-own", max_retries=0)
            with client, pytest.raises(openai.APIStatusError) as caught:
                client.files.create(file=("a.jsonl", b"{}\n"), purpose="fine-tune")
        assert [(r.method, r.path) for r in dropping.requests] == [("POST", "/v1/files")]
    assert caught.value.status_code == 502


class _OneEach(socketserver.StreamRequestHandler):
    """Answers one request per connection as if keeping it alive, then hangs up without a word."""

    def handle(self) -> None:
        length = 0
        self.rfile.readline()
        while (header := self.rfile.readline()) not in (b"\r\n", b""):
            name, _, value = header.decode().partition(":")
            length = int(value) if name.lower() == "content-length" else length
        self.rfile.read(length)
        self.server.served += 1  # type: ignore[attr-defined]
        body = b'{"ok": true}'
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def test_only_a_kept_alive_connection_found_closed_is_tried_again_once() -> None:
    """The second POST goes out on the kept-alive connection the server has closed: nothing of it
    was read there, so it is sent again, once, on a fresh connection; the server serves it once."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _OneEach)
    server.served = 0  # type: ignore[attr-defined]
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        for _ in range(2):
            assert upstream.post(base, "/chat/completions", {}, None, 10).read() == b'{"ok": true}'
    finally:
        server.shutdown()
        server.server_close()
    assert server.served == 2  # type: ignore[attr-defined]
