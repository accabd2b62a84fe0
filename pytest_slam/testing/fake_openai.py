"""A faithful OpenAI-compatible server on 127.0.0.1, for tests, golden recording and benchmarks.

It stands in for the hosted reference model, a judge model or an embeddings endpoint, so the real
``openai`` client can be exercised without a network or a key. Stdlib only (HTTP/1.1 keep-alive,
TCP_NODELAY, daemon threads), so a reply costs well under a millisecond.

Token counts are a deterministic estimate, not a real tokenizer: one token per word or
punctuation mark (regex ``\\w+|[^\\w\\s]``), plus 4 per chat message and 3 per prompt.

By default each request is delayed on its own (every connection has its own thread, so any number
are served at once, as a hosted API does). ``batch=B`` simulates a batching engine instead (vLLM,
llama.cpp with slots): chat requests are served in steps of a constant time, up to B at once, so
that a client's concurrency, not the server, is what the throughput benches measure.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import hashlib
import json
import math
import re
import signal
import socket
import struct
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = str | dict[str, Any]
Answer = str | Callable[[dict[str, Any]], "Reply | list[Reply] | bytes"]
_TOKEN = re.compile(r"\w+|[^\w\s]")
_ROUTES = {
    ("POST", "/v1/chat/completions"): "_chat",
    ("POST", "/v1/embeddings"): "_embed",
    ("GET", "/v1/models"): "_models",
    ("GET", "/health"): "_health",  # as vLLM and llama.cpp serve it, so it can stand in for one
    ("GET", "/fake/stats"): "_stats",  # not OpenAI's: what a bench in another process reads
    ("POST", "/fake/stats/reset"): "_reset",
}
_CHAT = "/v1/chat/completions"


@dataclass
class FakeRequest:
    """One request as received; ``headers`` keys are lower-case, ``json`` is None without a body."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any


def count_tokens(text: str) -> int:
    """The estimate used for ``usage``: words and punctuation marks."""
    return len(_TOKEN.findall(text))


def split_tokens(text: str) -> list[str]:
    """Split ``text`` into token pieces that join back to it exactly (leading space kept)."""
    pieces, start = [], 0
    for match in _TOKEN.finditer(text):
        pieces.append(text[start : match.end()])
        start = match.end()
    if start < len(text) and pieces:
        pieces[-1] += text[start:]
    elif start < len(text):
        pieces.append(text[start:])
    return pieces


def embed(text: str, dimensions: int = 256) -> list[float]:
    """Hashed bag-of-words, L2-normalised: texts sharing words get a higher cosine."""
    vector = [0.0] * dimensions
    for word in _TOKEN.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dimensions
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _prompt_tokens(messages: Iterable[dict[str, Any]]) -> int:
    total = 3
    for message in messages:
        content = message.get("content") or ""
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
            content = " ".join(str(part.get("text", "")) for part in content)
        total += 4 + count_tokens(str(content))
    return total


def _json_object(raw: bytes) -> dict[str, Any] | None:
    """The body as a JSON object ({} when empty), or None when it is not one."""
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """Fill what an ``answer`` callable may leave out (id, type, JSON-encoded arguments)."""
    fn = call.get("function", call)
    args = fn.get("arguments", "{}")
    function = {
        "name": fn["name"],
        "arguments": args if isinstance(args, str) else json.dumps(args),
    }
    call_id = call.get("id") or f"call_{uuid.uuid4().hex[:24]}"
    return {"id": call_id, "type": "function", "function": function}


@dataclass
class _Reply:
    """One choice of an answer: its text (None with tool calls only), tool calls, finish reason."""

    content: str | None
    tools: list[dict[str, Any]]
    finish: str


def _usage(body: dict[str, Any], replies: list[_Reply]) -> dict[str, int]:
    """Prompt tokens once; completion tokens summed over every choice, as the API counts them."""
    prompt, out = _prompt_tokens(body["messages"]), 0
    for reply in replies:
        calls = " ".join(
            t["function"]["name"] + " " + t["function"]["arguments"] for t in reply.tools
        )
        out += count_tokens(f"{reply.content or ''} {calls}")
    return {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}


def _top_logprobs(body: dict[str, Any]) -> int | None:
    """How many alternatives each token lists; None when the request did not ask for logprobs."""
    return int(body.get("top_logprobs") or 0) if body.get("logprobs") else None


def _utf8(piece: str) -> bytes:
    """A token's bytes; a lone surrogate (a token that split a character) as its own three."""
    return piece.encode("utf-8", "surrogatepass")


def _logprobs(pieces: list[str], top: int) -> list[dict[str, Any]]:
    """Deterministic token logprobs: the token first, then ``top - 1`` less likely alternatives."""
    out = []
    for piece in pieces:
        logprob = -round(0.01 * (1 + len(piece.strip()) % 7), 2)
        entry = {"token": piece, "logprob": logprob, "bytes": list(_utf8(piece))}
        alts = [
            {
                "token": f"{piece}~{k}",
                "logprob": logprob - k,
                "bytes": list(_utf8(f"{piece}~{k}")),
            }
            for k in range(1, top)
        ]
        out.append({**entry, "top_logprobs": [entry, *alts][:top]})
    return out


@dataclass
class _Job:
    """One chat request in the batching engine: the steps it still needs, set ``done`` when served."""

    steps_left: int
    served: bool = False
    done: threading.Event = field(default_factory=threading.Event)


class _Batcher:
    """A batching engine's schedule: steps of ``step_s``, each serving up to ``size`` requests at once.

    A request queues (first come, first served) until the running batch has a free place, then
    holds it for ``steps`` steps; places are filled only between steps, as an engine's scheduler
    does. So ``size`` requests take as long as one, and ``size + 1`` take twice as long. ``batches``
    says how many requests each step served, in order: what a test asserts on, not time.
    """

    def __init__(self, size: int, step_s: float, steps: int, held: bool) -> None:
        self.size, self.step_s, self.steps, self.held = size, step_s, steps, held
        self.batches: list[int] = []
        self._stopping = threading.Event()  # its own: a restarted server gets a new engine
        self._cond = threading.Condition()
        self._waiting: deque[_Job] = deque()

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._waiting)

    def start(self) -> None:
        threading.Thread(target=self._run, name="fake-openai-batcher", daemon=True).start()

    def hold(self, held: bool) -> None:
        """While held, requests queue and no step starts (a test fills the queue, then releases)."""
        with self._cond:
            self.held = held
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopping.set()
            self._cond.notify_all()

    def serve(self) -> bool:
        """Block until this request's steps are done; False when the server stopped first."""
        job = _Job(self.steps)
        with self._cond:
            self._waiting.append(job)
            self._cond.notify_all()
        job.done.wait()
        return job.served

    def wait_queued(self, count: int, timeout_s: float) -> bool:
        """Wait until ``count`` requests are queued (while ``held``, none is taken)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._waiting) >= count, timeout_s)

    def _run(self) -> None:
        running: list[_Job] = []

        def ready() -> bool:
            return self._stopping.is_set() or (not self.held and bool(running or self._waiting))

        while True:
            with self._cond:
                self._cond.wait_for(ready)
                if self._stopping.is_set():
                    break
                while self._waiting and len(running) < self.size:
                    running.append(self._waiting.popleft())
                self.batches.append(len(running))
            self._stopping.wait(self.step_s)
            for job in running:
                job.steps_left -= 1
                if job.steps_left <= 0:
                    job.served = True
                    job.done.set()
            running[:] = [job for job in running if job.steps_left > 0]
        with self._cond:  # stopped: nobody waits on a step that will never come
            for job in [*running, *self._waiting]:
                job.done.set()
            self._waiting.clear()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's backlog is 5: a client opening 16-64 connections at once (answers fetched
    # ahead, a concurrency bench) would see SYNs dropped and retried a second later (a second of
    # false latency), or connections reset.
    request_queue_size = 1024
    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (or stop() closing it) is normal here, not a traceback."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._connections.add(self.connection)

    def finish(self) -> None:
        self.server.fake._connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: a test's output should not fill with access logs."""

    def do_GET(self) -> None:
        self.server.fake._handle(self)

    do_POST = do_DELETE = do_GET

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.send_raw(status, json.dumps(body).encode(), headers)

    def send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_api_error(self, status: int, msg: str, code: str | None = None, **kw: Any) -> None:
        """OpenAI's error body, which the client turns into e.g. ``openai.RateLimitError``."""
        kind = "server_error" if status >= 500 else "invalid_request_error"
        kind = "requests" if status == 429 else kind  # OpenAI's type for rate limits
        error = {"message": msg, "type": kind, "param": None, "code": code}
        self.send_json(status, {"error": error}, **kw)


class FakeOpenAI:
    """OpenAI-compatible server: chat completions (plain and SSE), embeddings and models.

    ``answer`` is the reply text, or a callable taking the request JSON and returning the text or
    ``{"content": ..., "tool_calls": [...]}``, or a list of those, one per choice (``n``; a single
    answer is repeated ``n`` times), or ``bytes``: the whole response body, sent as it is (what
    a broken proxy sends: invalid JSON escapes, bytes that are not UTF-8). A text's lone
    surrogate is sent as the API sends it, a JSON escape (``"\\ud800"``). ``logprobs=true`` in
    a request gets deterministic token logprobs (``top_logprobs`` alternatives each), streamed
    piece by piece. ``latency_s`` is the whole delay of a reply; ``ttft_s`` the delay before the
    first content chunk (the rest is spread over the stream; when None, ``latency_s`` is spread
    evenly over all chunks). ``fail``
    makes the first requests fail in order: an HTTP status (429 carries Retry-After) or
    ``"timeout"`` (sleep ``timeout_sleep_s``, then close without answering).
    ``report_usage=False`` is a server that reports no token usage and ignores
    ``stream_options.include_usage``, as llama-cpp-python's does. ``max_n=1`` refuses ``n`` > 1
    with a 400, as llama.cpp's server does. Every request, failed or not, is kept in ``requests``.

    ``batch=B`` serves chat requests as a batching engine does (``_Batcher``): in steps of
    ``step_s`` (default ``latency_s``: one step per request), up to B requests per step, each
    request taking ``latency_s`` of steps; ``batches`` lists each step's size, ``hold()`` and
    ``release()`` let a test queue requests before the first step. ``peak_in_flight`` is the most
    chat requests it was answering at once, in either mode. ``GET /fake/stats`` serves these
    counts to a bench in another process, ``POST /fake/stats/reset`` clears them.
    """

    def __init__(
        self,
        answer: Answer = "This is the fake model's answer.",
        *,
        model: str = "gpt-4-0613",
        latency_s: float = 0.0,
        ttft_s: float | None = None,
        fail: Iterable[int | str] = (),
        timeout_sleep_s: float = 10.0,
        retry_after_s: float = 0.05,
        embeddings_down: bool = False,
        api_key: str | None = None,
        port: int = 0,
        report_usage: bool = True,
        max_n: int | None = None,
        batch: int | None = None,
        step_s: float | None = None,
    ) -> None:
        failures = list(fail)
        for item in failures:
            if item != "timeout" and not (isinstance(item, int) and 400 <= item <= 599):
                raise ValueError(f"FakeOpenAI fail={item!r}: use a status 400-599 or 'timeout'")
        if latency_s < 0 or (ttft_s or 0) < 0 or (step_s or 0) < 0:
            raise ValueError("FakeOpenAI latency_s, ttft_s and step_s must be >= 0 seconds")
        if batch is not None and batch < 1:
            raise ValueError(f"FakeOpenAI batch={batch}: use at least 1 request per step")
        if step_s is not None and batch is None:
            raise ValueError("FakeOpenAI step_s needs batch=B (the batching engine's step)")
        self.answer, self.model, self.latency_s, self.ttft_s = answer, model, latency_s, ttft_s
        self.timeout_sleep_s, self.retry_after_s = timeout_sleep_s, retry_after_s
        self.embeddings_down, self.api_key, self.port = embeddings_down, api_key, port
        self.report_usage = report_usage
        self.max_n = max_n
        self.batch, self.step_s = batch, latency_s if step_s is None else step_s
        self.peak_in_flight = 0
        self.requests: list[FakeRequest] = []
        self._failures = failures
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._batcher: _Batcher | None = None
        self._held = False
        self._in_flight = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def hits(self) -> int:
        return len(self.requests)

    @property
    def batches(self) -> list[int]:
        """How many requests each of the batching engine's steps served, in order ([] without)."""
        return list(self._batcher.batches) if self._batcher else []

    @property
    def peak_batch(self) -> int:
        """The most requests one step served: at most ``batch``."""
        return max(self.batches, default=0)

    def hold(self) -> None:
        """Batching mode: queue the chat requests that arrive, start no step until ``release()``."""
        self._set_held(True)

    def release(self) -> None:
        self._set_held(False)

    def wait_queued(self, count: int, timeout_s: float = 30.0) -> bool:
        """Batching mode: wait until ``count`` chat requests are queued; False after the timeout."""
        if self._batcher is None:
            raise RuntimeError("FakeOpenAI.wait_queued needs batch=B and a started server")
        return self._batcher.wait_queued(count, timeout_s)

    def _set_held(self, held: bool) -> None:
        if self.batch is None:
            raise RuntimeError("FakeOpenAI.hold and release need batch=B (the batching engine)")
        self._held = held
        if self._batcher is not None:
            self._batcher.hold(held)

    def _steps_per_request(self) -> int:
        longest = max(self.latency_s, self.ttft_s or 0.0)
        return max(1, round(longest / self.step_s)) if self.step_s else 1

    def start(self) -> FakeOpenAI:
        """Bind (port 0 picks a free one) and serve on a daemon thread."""
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", self.port), _Handler)
        self._server.fake = self
        self.port = self._server.server_address[1]
        if self.batch is not None:
            self._batcher = _Batcher(self.batch, self.step_s, self._steps_per_request(), self._held)
            self._batcher.start()
        serve = functools.partial(self._server.serve_forever, poll_interval=0.02)  # fast stop()
        threading.Thread(target=serve, name="fake-openai", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers and close every socket, freeing the port."""
        if self._server is None:
            return
        self._stopping.set()
        if self._batcher is not None:
            self._batcher.stop()
        self._server.shutdown()
        self._server.server_close()
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling -------------------------------------------------------------------

    def _handle(self, h: _Handler) -> None:
        path = h.path.split("?", 1)[0].rstrip("/")
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        body = _json_object(raw)
        headers = {k.lower(): v for k, v in h.headers.items()}
        self.requests.append(FakeRequest(h.command, path, headers, body if raw else None))
        with self._lock:
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            return self._fail(h, failure)
        if self.api_key and headers.get("authorization") != f"Bearer {self.api_key}":
            return h.send_api_error(401, "Incorrect API key provided.", "invalid_api_key")
        if body is None:
            return h.send_api_error(400, "We could not parse the JSON body of your request.")
        route = _ROUTES.get((h.command, path))
        if route is None:
            return h.send_api_error(404, f"Invalid URL ({h.command} {path})")
        getattr(self, route)(h, body)

    def _fail(self, h: _Handler, failure: int | str) -> None:
        if failure == "timeout":
            self._stopping.wait(self.timeout_sleep_s)
            h.close_connection = True
            return
        if failure == 429:
            ms = round(self.retry_after_s * 1000)
            headers = {"retry-after-ms": str(ms), "retry-after": str(math.ceil(ms / 1000))}
            msg = f"Rate limit reached for {self.model}."
            return h.send_api_error(429, msg, "rate_limit_exceeded", headers=headers)
        h.send_api_error(int(failure), f"Injected failure: {HTTPStatus(int(failure)).phrase}.")

    def _sleep_until(self, deadline: float) -> None:
        while (left := deadline - time.monotonic()) > 0 and not self._stopping.is_set():
            self._stopping.wait(left)

    def _reply(self, body: dict[str, Any], out: Reply | list[Reply]) -> list[_Reply]:
        """The answer for one request, one per choice (``n``), each truncated to max_tokens."""
        n = body.get("n") or 1
        answers = out if isinstance(out, list) else [out] * n
        if len(answers) != n:
            raise ValueError(f"answer returned {len(answers)} choice(s) for n={n}")
        return [self._one(body, item) for item in answers]

    @staticmethod
    def _one(body: dict[str, Any], out: Any) -> _Reply:
        if not isinstance(out, str | dict):
            raise TypeError(f"answer returned {out!r}: return a str or a dict with 'content'")
        out = {"content": out} if isinstance(out, str) else out
        content, tools = out.get("content"), [_tool_call(c) for c in out.get("tool_calls") or ()]
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if content and limit and count_tokens(content) > limit:
            return _Reply("".join(split_tokens(content)[:limit]).rstrip(), [], "length")
        return _Reply(content, tools, "tool_calls" if tools else "stop")

    def _chat(self, h: _Handler, body: dict[str, Any]) -> None:
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            self._chat_counted(h, body)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _chat_counted(self, h: _Handler, body: dict[str, Any]) -> None:
        start = time.monotonic()
        for name in ("model", "messages"):
            if name not in body:
                return h.send_api_error(400, f"Missing required parameter: '{name}'.")
        if self.max_n is not None and (body.get("n") or 1) > self.max_n:
            return h.send_api_error(400, f"Only n <= {self.max_n} is supported.")
        try:
            out = self.answer(body) if callable(self.answer) else self.answer
            if isinstance(out, bytes):  # a body as a broken proxy sends it, not encoded here
                return h.send_raw(200, out)
            replies = self._reply(body, out)
            usage = _usage(body, replies)
        except Exception as exc:  # a broken answer callable: tell the test, keep serving
            return h.send_api_error(500, f"FakeOpenAI could not answer: {exc!r}")
        chat_id = f"chatcmpl-{uuid.uuid4().hex[:29]}"
        head = {"id": chat_id, "created": int(time.time()), "model": self.model}
        head["system_fingerprint"] = "fp_fake"
        top = _top_logprobs(body)
        if self._batcher is not None:
            if not self._batcher.serve():  # the server stopped while the request queued
                h.close_connection = True
                return
            start = time.monotonic() - max(self.latency_s, self.ttft_s or 0.0)  # delay: the steps
        if body.get("stream"):
            return self._stream(h, body, head, replies, usage, start)
        self._sleep_until(start + max(self.latency_s, self.ttft_s or 0.0))
        choices = []
        for index, reply in enumerate(replies):
            message: dict[str, Any] = {
                "role": "assistant",
                "content": reply.content,
                "refusal": None,
            }
            if reply.tools:
                message["tool_calls"] = reply.tools
            pieces = split_tokens(reply.content or "")
            logprobs = None if top is None else {"content": _logprobs(pieces, top), "refusal": None}
            choices.append(
                {
                    "index": index,
                    "message": message,
                    "logprobs": logprobs,
                    "finish_reason": reply.finish,
                }
            )
        shown = usage if self.report_usage else None
        h.send_json(200, {**head, "object": "chat.completion", "choices": choices, "usage": shown})

    def _stream(
        self,
        h: _Handler,
        body: dict[str, Any],
        head: dict[str, Any],
        replies: list[_Reply],
        usage: dict[str, Any],
        start: float,
    ) -> None:
        asked = bool((body.get("stream_options") or {}).get("include_usage"))
        with_usage = asked and self.report_usage
        top = _top_logprobs(body)
        deltas: list[tuple[int, dict[str, Any], Any]] = []  # (choice, delta, logprobs)
        for index, reply in enumerate(replies):
            for piece in split_tokens(reply.content or ""):
                lp = None if top is None else {"content": _logprobs([piece], top), "refusal": None}
                deltas.append((index, {"content": piece}, lp))
            deltas += [
                (index, {"tool_calls": [{"index": i, **call}]}, None)
                for i, call in enumerate(reply.tools)
            ]
        total = max(self.latency_s, self.ttft_s or 0.0)
        first = self.ttft_s if self.ttft_s is not None else total / max(len(deltas), 1)
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream; charset=utf-8")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def send(
            delta: dict[str, Any] | None,
            finish_reason: str | None = None,
            index: int = 0,
            logprobs: Any = None,
            **extra: Any,
        ) -> None:
            choice = {
                "index": index,
                "delta": delta,
                "logprobs": logprobs,
                "finish_reason": finish_reason,
            }
            choices = [] if delta is None else [choice]
            chunk = {**head, "object": "chat.completion.chunk", "choices": choices}
            chunk |= {"usage": None, **extra} if with_usage else {}
            data = f"data: {json.dumps(chunk)}\n\n".encode()
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        self._sleep_until(start + first)
        for index, reply in enumerate(replies):
            empty = "" if reply.content is not None else None
            send({"role": "assistant", "content": empty, "refusal": None}, index=index)
        for i, (index, delta, logprobs) in enumerate(deltas):
            self._sleep_until(start + first + (total - first) * i / max(len(deltas) - 1, 1))
            send(delta, index=index, logprobs=logprobs)
        self._sleep_until(start + total)
        for index, reply in enumerate(replies):
            send({}, reply.finish, index=index)
        if with_usage:
            send(None, usage=usage)
        h.wfile.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")

    def _embed(self, h: _Handler, body: dict[str, Any]) -> None:
        if self.embeddings_down:
            return h.send_api_error(503, "The embeddings engine is currently overloaded.")
        inputs = body.get("input")
        if not inputs or not isinstance(inputs, str | list):
            return h.send_api_error(400, "'input' must be a non-empty string or list.")
        raw: list[Any] = (
            [inputs] if isinstance(inputs, str) or isinstance(inputs[0], int) else inputs
        )
        texts = [t if isinstance(t, str) else " ".join(map(str, t)) for t in raw]
        dims, as_b64 = int(body.get("dimensions") or 256), body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector: Any = embed(text, dims)
            if as_b64:
                vector = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": vector})
        tokens = sum(count_tokens(t) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        h.send_json(
            200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage}
        )

    def _health(self, h: _Handler, body: dict[str, Any]) -> None:
        h.send_json(200, {"status": "ok"})

    def _stats(self, h: _Handler, body: dict[str, Any]) -> None:
        """Counts for a bench: chat requests, distinct chat bodies (each asked once?), peaks."""
        chats = [r.json for r in self.requests if r.method == "POST" and r.path == _CHAT]
        distinct = {json.dumps(b, sort_keys=True) for b in chats}
        stats = {
            "chat_requests": len(chats),
            "distinct_chat_bodies": len(distinct),
            "peak_in_flight": self.peak_in_flight,
            "steps": len(self.batches),
            "peak_batch": self.peak_batch,
        }
        h.send_json(200, stats)

    def _reset(self, h: _Handler, body: dict[str, Any]) -> None:
        self.requests.clear()
        with self._lock:
            self.peak_in_flight = self._in_flight
        if self._batcher is not None:
            self._batcher.batches.clear()
        h.send_json(200, {"reset": True})

    def _models(self, h: _Handler, body: dict[str, Any]) -> None:
        model = {"id": self.model, "object": "model", "created": 1686588896, "owned_by": "openai"}
        h.send_json(200, {"object": "list", "data": [model]})


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT, printing the base URL first (for bench scripts and demos)."""
    parser = argparse.ArgumentParser(prog="python -m pytest_slam.testing.fake_openai")
    parser.add_argument("--port", type=int, default=0, help="Port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--answer", default="This is the fake model's answer.", help="Reply text")
    parser.add_argument("--model", default="gpt-4-0613", help="Model name it reports")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="Total delay of each reply")
    parser.add_argument("--ttft-ms", type=float, default=None, help="Delay before the first chunk")
    parser.add_argument(
        "--batch", type=int, default=None, help="Serve as a batching engine: up to B per step"
    )
    parser.add_argument(
        "--step-ms", type=float, default=None, help="With --batch: one step (default: latency)"
    )
    args = parser.parse_args(argv)
    latency, ttft = args.latency_ms / 1000, None if args.ttft_ms is None else args.ttft_ms / 1000
    step = None if args.step_ms is None else args.step_ms / 1000
    try:
        fake = FakeOpenAI(
            args.answer,
            model=args.model,
            latency_s=latency,
            ttft_s=ttft,
            port=args.port,
            batch=args.batch,
            step_s=step,
        )
        fake.start()
    except ValueError as exc:
        parser.error(str(exc))
    except OSError as exc:
        parser.error(f"cannot listen on 127.0.0.1:{args.port} ({exc}): pick another --port, or 0")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(fake.base_url, flush=True)
    while not stop.wait(1.0):
        pass
    fake.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
