"""The loopback swap proxy: an OpenAI-compatible server on 127.0.0.1 that the product's SDK calls reach.

The plugin points ``OPENAI_BASE_URL`` here before test modules are imported, so clients built at import
time, with an explicit key, or lazily by ``openai.chat.completions`` all arrive here. Each request is
handed to a Router, which decides the target from the running test (or a path prefix) and records it.

Only the run may use it. Every URL carries this proxy's secret as its first path segment
(``http://127.0.0.1:PORT/SECRET/v1``): the SDK reads it from ``OPENAI_BASE_URL``, which the run's
subprocesses inherit. A request without it, or from a socket another user owns (peer.py), gets 401
before anything is read, forwarded or recorded.

Paths after the secret: ``/v1/...`` goes wherever the Router says the current test goes;
``/slam/m/NAME/v1/...`` goes to model NAME; ``/slam/ref/v1/...`` is answered by the golden store.
While swapping, ``/chat/completions`` is recorded; ``/responses`` is translated to one chat call
(responses.py) unless the model serves it itself (``responses = true``); ``/embeddings`` never goes
to the candidate (embeddings.py); anything else is relayed with the candidate's key and model name.

HTTP is parsed by h11 (framing, Content-Length, chunked bodies, header syntax); this module adds the
limits (head and body size, idle time between reads, a deadline for the whole request) and the
performance habits: head and body in one write, TCP_NODELAY, keep-alive, and SSE relayed chunk by
chunk. It never logs headers or keys.

A request is served by an ``Exchange``, which writes its answer to a ``Responder`` and knows no
transport: ``_Wire`` for a socket connection, ``local.LocalAnswer`` for a call of this very process
that redirect.py hands over in memory (``answer_local``; the openai SDK's sync client during an
opted-in test), so both get the same answers, streams and errors.
"""

from __future__ import annotations

import functools
import hmac
import http.client
import json
import os
import secrets
import select
import selectors
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Protocol

import h11

from pytest_slam.errors import SlamError
from pytest_slam.swap import upstream
from pytest_slam.swap.chat import (
    CALLER_DEADLINE,
    SERVED_DEADLINE,
    ChatResult,
    Deadline,
    Relay,
    Target,
)
from pytest_slam.swap.fleet import send
from pytest_slam.swap.local import LocalAnswer, Workers
from pytest_slam.swap.peer import owner_uid
from pytest_slam.swap.upstream import JSONObject

CHAT_PATH = "/chat/completions"
RESPONSES_PATH = "/responses"
EMBEDDINGS_PATH = "/embeddings"
REDIRECTED = "x-slam-redirected-from"  # set by redirect.py on a request it sent here
BLOCK = 65536
HEAD_LIMIT = 64 * 1024  # request line and headers, bytes
BODY_LIMIT = 32 * 1024 * 1024  # a chat request with images stays far below; a 50 MB upload does not
IDLE_S = 120.0  # longer than any client's keep-alive expiry (httpx: 5 s), so it never races a reuse
REQUEST_S = 300.0  # a whole request (head, body) from its first byte: a trickle cannot hold on
DRAIN_S = 1.0  # after a refusal, how long what the client still sends is read (then closed)
METHODS = ("GET", "POST", "DELETE")
# Not passed on, either way: hop-by-hop headers (RFC 9110 7.6.1), and the framing this hop sets.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
     "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length", "expect"}
)  # fmt: skip
SSE_HEADERS = [("Content-Type", "text/event-stream")]
CHUNKED = [("Transfer-Encoding", "chunked")]
REFUSED = (
    "pytest-slam: this swap proxy serves only the pytest run that started it; the request has no "
    "valid run secret in its URL or comes from another user's process. Use the OPENAI_BASE_URL "
    "the run sets."
)


class Router(Protocol):
    def chat(
        self,
        route: str,
        body: JSONObject,
        relay: Relay | None,
        gone: Callable[[], bool] | None = None,
    ) -> ChatResult: ...

    def target(self, route: str) -> Target: ...

    def swapping(self, route: str) -> bool: ...

    def serves_responses(self, route: str) -> bool: ...

    def embeddings(
        self, route: str, body: JSONObject, headers: list[tuple[str, str]]
    ) -> tuple[int, bytes]: ...


class RouteError(SlamError, kind="swap"):
    """A request the proxy refuses, with the HTTP status and the message the SDK will raise."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def split_route(path: str) -> tuple[str, str]:
    """``/slam/m/NAME/v1/chat/completions`` -> (``m/NAME``, ``/chat/completions``)."""
    path = path.split("?", 1)[0]
    route = ""
    if path.startswith("/slam/"):
        head, sep, rest = path[len("/slam/") :].partition("/v1/")
        if not sep:
            raise RouteError(404, "pytest-slam: no such route under /slam/")
        route, path = head, "/v1/" + rest
    if not path.startswith("/v1/"):
        raise RouteError(404, "pytest-slam: the swap proxy serves /v1/... only")
    return route, path[len("/v1") :]


def forwarded_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The caller's headers as a proxy passes them on: all but hop-by-hop ones (RFC 9110 7.6.1),
    including any the Connection header names; Host and Content-Length are set for the next hop."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name == "connection"
        for token in value.split(",")
    }
    return [(n, v) for n, v in headers if n not in HOP_BY_HOP and n not in named]


def _json_object(body: bytes) -> JSONObject:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, RecursionError) as exc:  # nested past the parser's depth: not served
        raise RouteError(400, f"pytest-slam: request body is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RouteError(400, "pytest-slam: request body must be a JSON object")
    return data


class Responder(Protocol):
    """Where an answer is written: the loopback socket (``_Wire``, h11) or a caller in this process
    (``local.LocalAnswer``). An answer is ``whole``, or ``head`` then ``data``... then ``end``."""

    def whole(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None: ...

    def head(self, status: int, headers: list[tuple[str, str]]) -> None: ...

    def data(self, data: bytes) -> None: ...

    def end(self, last: bytes = b"") -> None:
        """The end of a streamed body, with ``last`` as its last chunk (one write on a socket)."""
        ...

    def gone(self) -> bool:
        """Whether the caller is known to have left before its answer (its own timeout)."""
        ...

    def unreachable(self, why: str, timed_out: bool) -> None:
        """No answer at all: the model could not be connected to (``timed_out``: not in time), so
        the caller sees the connection error its client raises for such an endpoint."""
        ...


def unserved(method: str) -> str | None:
    """Why a method is refused, or None."""
    if method in METHODS:
        return None
    return f"pytest-slam: the swap proxy does not serve {method} requests"


class Exchange:
    """One request whose guard passed: routed, forwarded, recorded and answered through a Responder.

    It knows no transport, so a call that came over the loopback socket and one handed over in
    process (local.py) get the same statuses, headers, bodies and streams.
    """

    def __init__(self, router: Router, out: Responder) -> None:
        self.router, self.out = router, out

    def serve(self, method: str, rest: str, headers: list[tuple[str, str]], body: bytes) -> None:
        """``rest``: the request target after the secret (``/v1/...`` or ``/slam/ROUTE/v1/...``)."""
        try:
            route, path = split_route(rest)
            query = rest.partition("?")[2]
            router = self.router
            swapped = method == "POST" and router.swapping(route)
            if swapped and path == CHAT_PATH:
                self.chat(route, _json_object(body))
            elif swapped and path == RESPONSES_PATH and not router.serves_responses(route):
                self.responses(route, _json_object(body))
            elif swapped and path == EMBEDDINGS_PATH:
                status, payload = router.embeddings(route, _json_object(body), headers)
                extra = [("x-should-retry", "false")] if status >= 400 else []
                self.send(status, payload, extra)
            else:
                self.raw(method, route, path + ("?" + query if query else ""), headers, body)
        except RouteError as exc:
            self.error(exc.status, str(exc))

    def chat(self, route: str, body: JSONObject) -> None:
        stream = _Stream(self.out) if body.get("stream") else None
        result = self.router.chat(route, body, stream.send if stream else None, self.out.gone)
        if result.unconnected is not None and not (stream is not None and stream.started):
            self.out.unreachable(
                f"pytest-slam: {result.call.error}", result.unconnected == "timeout"
            )
        elif stream is not None and stream.started:
            if result.call.error is not None:  # broke off mid-stream: say why in the stream
                stream.fail(f"pytest-slam: {result.call.error}")
            stream.finish()
        elif result.call.error is not None and result.error_body is None:
            self.error(result.status, f"pytest-slam: {result.call.error}")
        elif result.error_body is not None:
            extra = [("Retry-After", result.retry_after)] if result.retry_after else []
            self.send(result.status, result.error_body, extra)
        elif stream is not None:  # served without upstream chunks (a golden replay)
            stream.replay(result)
        else:
            self.send(200, json.dumps(result.completion).encode())

    def responses(self, route: str, body: JSONObject) -> None:
        """A Responses API call to a Chat Completions candidate: translated (responses.py) and sent
        through the router's chat, so it is recorded, paired, scored and timed like a chat call."""
        from pytest_slam.swap import responses

        stream = _Stream(self.out) if body.get("stream") else None
        router = self.router
        results: list[ChatResult] = []

        def chat(chat_body: JSONObject, relay: Relay | None) -> responses.ChatOutcome:
            # A ChatResult is a ChatOutcome; the Protocol's members are settable, which makes mypy
            # compare ``call`` invariantly (read-only members in responses.py would make this a no-op).
            results.append(router.chat(route, chat_body, relay, self.out.gone))
            return results[-1]

        reply = responses.serve(body, chat, stream.send if stream else None)
        unconnected = results[-1].unconnected if results else None
        if reply is not None and unconnected is not None:  # as for a chat call: no answer at all
            self.out.unreachable(f"pytest-slam: {results[-1].call.error}", unconnected == "timeout")
        elif reply is not None:  # these errors are final (a retry asks the same): say so
            extra = [("x-should-retry", "false")] if reply.status >= 400 else []
            self.send(reply.status, reply.payload, extra)
        elif stream is not None:
            stream.end()

    def raw(
        self, method: str, route: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        """Anything not swapped: relayed as is. Passthrough carries the caller's own headers (its key,
        organization, project, custom headers); a candidate gets the caller's body with its own key
        and its own model name (a natively served Responses call, ``responses = true``)."""
        target = self.router.target(route)
        if target.role == "passthrough":
            origin = next((v for n, v in headers if n == REDIRECTED), None)
            if origin is not None:  # its key belongs to that host, not to the original endpoint
                raise RouteError(
                    409,
                    f"pytest-slam: a call to {origin} was redirected here "
                    "outside an opted-in test; it is not forwarded",
                )
            sent = forwarded_headers(headers)
        else:
            keep = ("content-type", "accept", "accept-encoding")
            sent = [(n, v) for n, v in headers if n in keep]
            if target.api_key:
                sent.append(("Authorization", f"Bearer {target.api_key}"))
            if method == "POST":
                body = _as_candidate(body, target, path)
        timeout = upstream.timeout_for(target.spec)
        try:
            resp = send(
                target.replicas,
                target.base_url,
                lambda url: upstream.forward(url, method, path, sent, body, timeout),
            )[1]
        except upstream.UpstreamUnreachable as exc:
            raise RouteError(
                502, f"pytest-slam: {target.base_url} is unreachable ({exc})"
            ) from None
        relayed = [(n, v) for n, v in resp.raw.getheaders() if n.lower() not in HOP_BY_HOP]
        if resp.raw.length is not None:  # sized: one write
            self.send(resp.status, resp.read(), relayed, content_type=None)
            return
        self.out.head(resp.status, relayed)
        try:
            while block := resp.raw.read1(BLOCK):
                self.out.data(block)
        except BaseException:  # the caller left mid-body: the rest stays unread, the link unused
            resp.abandon()
            raise
        self.out.end()

    def send(
        self,
        status: int,
        payload: bytes,
        extra: list[tuple[str, str]] | None = None,
        content_type: str | None = "application/json",
    ) -> None:
        headers = [("Content-Type", content_type)] if content_type else []
        self.out.whole(status, [*headers, *(extra or [])], payload)

    def error(self, status: int, message: str) -> None:
        payload = json.dumps({"error": {"message": message, "type": "pytest_slam", "code": status}})
        # The SDK would retry 5xx with backoff; these errors are final, so say so.
        self.send(status, payload.encode(), [("x-should-retry", "false")])


class _Refuse(SlamError, kind="swap"):
    """Answer with this error now and close: the rest of the request is not read."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Wire:
    """A Responder on the connection's socket, framed by h11; a streamed body is chunked."""

    def __init__(self, handler: _Connection) -> None:
        self.handler = handler
        self.conn = handler.conn
        self.pending = b""  # a head not sent yet: it goes out with the first chunk
        self.chunked = False

    def whole(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
        """Status line, headers and body in one write.

        The caller is often a thread of this same process: headers written on their own wake it to
        parse them, and the two threads then trade the GIL once more before the body goes out.
        """
        headers = [*headers, ("Content-Length", str(len(payload)))]
        if self.conn.their_state is not h11.DONE:
            headers.append(("Connection", "close"))
        conn = self.conn
        out = conn.send(h11.Response(status_code=status, headers=headers, reason=_reason(status)))
        self.handler.write(out + conn.send(h11.Data(data=payload)) + conn.send(h11.EndOfMessage()))

    def head(self, status: int, headers: list[tuple[str, str]]) -> None:
        head = h11.Response(
            status_code=status, headers=[*headers, *CHUNKED], reason=_reason(status)
        )
        self.pending = self.conn.send(head)
        # HTTP/1.1 callers get the chunked framing h11 would write, framed here: h11's send costs
        # several microseconds per event, for every streamed token. An HTTP/1.0 caller's stream is
        # delimited by closing the connection instead, so h11 frames (and ends) it.
        self.chunked = self.conn.their_http_version != b"1.0"

    def data(self, data: bytes) -> None:
        if data:  # an empty chunk would end a chunked body
            out, self.pending = self.pending + self._frame(data), b""
            self.handler.write(out)

    def end(self, last: bytes = b"") -> None:
        framed = self._frame(last) if last else b""
        out, self.pending = self.pending + framed + self.conn.send(h11.EndOfMessage()), b""
        self.handler.write(out)

    def _frame(self, data: bytes) -> bytes:
        if self.chunked:
            return b"%x\r\n%b\r\n" % (len(data), data)
        return self.conn.send(h11.Data(data=data))

    def unreachable(self, why: str, timed_out: bool) -> None:
        """No response on a socket: the connection closes unanswered (``_Connection._one`` keeps
        no connection whose answer is not done), which an HTTP client raises as a broken
        connection (the openai SDK: ``APIConnectionError``, retried as it retries a refusal)."""

    def gone(self) -> bool:
        """The client closed its side (an HTTP client does on a read timeout): a zero-wait look,
        then a peek (a socket with a timeout would otherwise wait for data before peeking). A
        poll, not ``select``: a process with 1,024 files open has sockets ``select`` refuses."""
        sock = self.handler.sock
        try:
            look = select.poll()
            look.register(sock, select.POLLIN)
            readable = look.poll(0)
            return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):  # reset, or already closed (no file descriptor)
            return True


class _Connection(socketserver.BaseRequestHandler):
    """One client connection: requests in turn over keep-alive, parsed by h11."""

    server: SwapProxy
    request: socket.socket

    def setup(self) -> None:
        self.sock = self.request
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(self.server.idle_s)
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
        self.wire = _Wire(self)
        self.trusted = self.server.trusts(self.client_address)
        self.got_bytes = False  # of the request under way: an idle timeout before any says nothing
        self.began = 0.0  # when its first byte came (time.monotonic)

    def handle(self) -> None:
        try:
            while self._one():
                self.conn.start_next_cycle()
                self.got_bytes = False
        except (OSError, http.client.HTTPException):  # a side hung up or broke off: close
            pass

    # -- reading ----------------------------------------------------------------------------

    def _next(self) -> h11.Event:
        while True:
            event = self.conn.next_event()
            if isinstance(event, h11.Event):
                return event
            if event is h11.PAUSED:  # h11 pauses only after a whole request, which is never read on
                raise _Refuse(400, "pytest-slam: data after the request before its answer")
            if self.conn.they_are_waiting_for_100_continue:
                self.write(self.conn.send(h11.InformationalResponse(status_code=100, headers=[])))
            try:
                if self.got_bytes:  # the rest of a request: by its deadline too
                    self.sock.settimeout(min(self.server.idle_s, self._left()))
                data = self.sock.recv(BLOCK)
            except TimeoutError:
                if self.got_bytes:
                    raise _Refuse(408, self._late) from None
                return h11.ConnectionClosed()
            if not self.got_bytes:
                self.got_bytes, self.began = True, time.monotonic()
            self.conn.receive_data(data)

    def _left(self) -> float:
        """Seconds left of the request's deadline (``SwapProxy.request_s``); _Refuse when none."""
        left = self.began + self.server.request_s - time.monotonic()
        if left <= 0:
            raise _Refuse(408, self._late)
        return left

    @property
    def _late(self) -> str:
        return (
            f"pytest-slam: the request was not sent whole within {self.server.request_s:g} s "
            f"(or {self.server.idle_s:g} s passed with no data)"
        )

    def _one(self) -> bool:
        """Serve one request; whether the connection can carry another."""
        try:
            event = self._next()
            if not isinstance(event, h11.Request):  # closed between requests
                return False
            self._serve(event)
        except h11.RemoteProtocolError as exc:
            self._refuse(exc.error_status_hint, f"pytest-slam: malformed HTTP request ({exc})")
            self._drain()
            return False
        except _Refuse as exc:
            self._refuse(exc.status, str(exc))
            self._drain()
            return False
        return self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE

    def _drain(self) -> None:
        """After a refusal: stop sending, and read (briefly, boundedly) what the client still sends,
        so that closing with unread data does not reset the connection before it reads the answer."""
        self.sock.shutdown(socket.SHUT_WR)
        end = time.monotonic() + DRAIN_S
        for _ in range(64):
            left = end - time.monotonic()
            if left <= 0:
                return
            self.sock.settimeout(left)
            if not self.sock.recv(BLOCK):
                return

    def _body(self, request: h11.Request) -> bytes:
        names = {name for name, _ in request.headers}
        if b"content-length" in names and b"transfer-encoding" in names:
            raise _Refuse(
                400, "pytest-slam: a request with both Content-Length and Transfer-Encoding"
            )
        declared = next((v for n, v in request.headers if n == b"content-length"), b"0")
        if int(declared) > self.server.body_limit:
            raise _Refuse(413, self.server.too_large)
        parts, size = [], 0
        while isinstance(event := self._next(), h11.Data):
            size += len(event.data)
            if size > self.server.body_limit:
                raise _Refuse(413, self.server.too_large)
            parts.append(event.data)
        if not isinstance(event, h11.EndOfMessage):
            raise _Refuse(400, "pytest-slam: the request body ended early")
        return b"".join(parts)

    # -- serving ----------------------------------------------------------------------------

    def _serve(self, request: h11.Request) -> None:
        if sum(len(n) + len(v) + 4 for n, v in request.headers) > HEAD_LIMIT:
            raise _Refuse(431, f"pytest-slam: request headers over {HEAD_LIMIT} bytes")
        target = request.target.decode("latin-1")
        if not self.trusted or not self.server.authorized(target):
            raise _Refuse(401, REFUSED)
        method = request.method.decode("latin-1")
        refused = unserved(method)
        if refused:
            raise _Refuse(405, refused)
        body = self._body(request)
        self.sock.settimeout(self.server.idle_s)  # read whole: the answer's writes have no deadline
        headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in request.headers]
        Exchange(self.server.router, self.wire).serve(
            method, target[len(self.server.secret) + 1 :], headers, body
        )

    # -- writing ----------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if data:
            self.sock.sendall(data)

    def _refuse(self, status: int, message: str) -> None:
        """An error before the request was read whole: said, then the connection is closed."""
        if self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return  # already answering: closing is all that is left
        try:
            Exchange(self.server.router, self.wire).error(status, message)
        except h11.LocalProtocolError:  # no request line parsed yet (a timeout mid-head): by hand
            payload = json.dumps({"error": {"message": message, "code": status}}).encode()
            head = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            self.write(
                head % (status, _reason(status), len(payload))
                + b"Connection: close\r\n\r\n"
                + payload
            )


def _as_candidate(body: bytes, target: Target, path: str) -> bytes:
    """A JSON body with the candidate's model name; a native Responses call without an output
    limit gets the model's ``max_tokens_cap`` (an unbounded small model runs for minutes)."""
    try:
        data = json.loads(body) if body else None
    except (ValueError, RecursionError):  # a multipart upload (or too deep to be a request)
        return body
    if not isinstance(data, dict) or "model" not in data:
        return body
    data["model"] = target.spec.model_id or data["model"]
    if path.split("?", 1)[0] == RESPONSES_PATH and data.get("max_output_tokens") is None:
        data["max_output_tokens"] = target.spec.max_tokens_cap
    return json.dumps(data).encode()


def _within(
    job: Callable[[Callable[[], None]], None], answer: LocalAnswer, timeout: float | None
) -> Callable[[Callable[[], None]], None]:
    """``job`` for a worker, with the caller's read timeout as ``chat.SERVED_DEADLINE``: an
    answer not asked now that took longer is not served, and the caller reads its timeout."""
    if timeout is None:
        return job
    limit = Deadline(time.perf_counter() + timeout, timeout, on_passed=answer.time_out)

    def served(release: Callable[[], None]) -> None:
        token = SERVED_DEADLINE.set(limit)
        try:
            job(release)
        finally:
            SERVED_DEADLINE.reset(token)

    return served


def _nothing() -> None:
    """A served-in-place call has no worker to release."""


@functools.cache
def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


class _Stream:
    """Server-sent events to a streaming caller; the head goes out with the first event."""

    def __init__(self, out: Responder) -> None:
        self.out = out
        self.started = False

    def send(self, payload: bytes) -> None:
        if not self.started:
            self.out.head(200, SSE_HEADERS)
            self.started = True
        self.out.data(b"data: " + payload + b"\n\n")

    def fail(self, message: str) -> None:
        """An error event, which the SDK raises as openai.APIError with this message."""
        self.send(json.dumps({"error": {"message": message, "type": "pytest_slam"}}).encode())

    def finish(self) -> None:
        self.out.end(b"data: [DONE]\n\n")

    def end(self) -> None:
        """The end of a stream that has no ``[DONE]`` (Responses API events end on their own)."""
        self.out.end()

    def replay(self, result: ChatResult) -> None:
        from pytest_slam.swap.chat import stream_events

        body = result.call.request
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        for payload in stream_events(result.completion or {}, wants_usage):
            self.send(payload)
        self.finish()


class SwapProxy(socketserver.ThreadingTCPServer):
    """The proxy server; ``start()`` serves from a daemon thread until ``stop()``.

    ``secret`` (a fresh random one by default) is the first path segment of every URL it serves.
    """

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        router: Router,
        port: int = 0,
        *,
        secret: str | None = None,
        idle_s: float = IDLE_S,
        body_limit: int = BODY_LIMIT,
        request_s: float = REQUEST_S,
    ) -> None:
        super().__init__(("127.0.0.1", port), _Connection)
        self.router = router
        self.local = ("127.0.0.1", int(self.server_address[1]))  # the bound address, typed
        self.secret = secret or secrets.token_urlsafe(24)
        self._prefix = f"{self.secret}/".encode()
        self.idle_s, self.body_limit, self.request_s = idle_s, body_limit, request_s
        self.uid = os.getuid() if hasattr(os, "getuid") else None
        self._thread: threading.Thread | None = None
        self.workers = Workers("slam-local")

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.local[1]}"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/{self.secret}/v1"

    def url_for(self, route: str) -> str:
        return f"{self.origin}/{self.secret}/slam/{route}/v1"

    def authorized(self, target: str) -> bool:
        """Whether a request target starts with ``/SECRET/``, compared in constant time."""
        head = target[1 : len(self.secret) + 2].encode("latin-1")
        return hmac.compare_digest(head, self._prefix)

    @property
    def too_large(self) -> str:
        return f"pytest-slam: request body over {self.body_limit} bytes"

    def answer_local(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        timeout: float | None = None,
        in_place: bool = True,
    ) -> LocalAnswer | None:
        """Serve a request of this process without the socket (local.py), or None when it lacks
        the secret (then it goes over the socket, which refuses it). ``headers``: names lower-case;
        ``timeout``: the caller's read timeout in seconds (None: none); ``in_place`` False: even a
        plain call goes to a worker (an asyncio caller's thread runs its loop).

        A chat call that does not stream is served right here, in the caller's thread: handing
        it to a worker and back is two thread wake-ups per call. Its timeout still holds
        (``chat.CALLER_DEADLINE``): when it runs out first, the caller gets the read timeout the
        socket would have given and the call is recorded as unanswered. A stream, another endpoint
        or the reference is served by a worker while the caller waits as it would on the socket.
        """
        if not self.authorized(target):
            return None
        answer = LocalAnswer()
        exchange = Exchange(self.router, answer)
        refused = unserved(method) or (self.too_large if len(body) > self.body_limit else None)

        def job(release: Callable[[], None]) -> None:
            answer.on_complete = release
            try:
                if refused:
                    exchange.error(405 if unserved(method) else 413, refused)
                else:
                    exchange.serve(method, target[len(self.secret) + 1 :], headers, body)
            except (OSError, http.client.HTTPException):  # the caller left, or upstream broke
                answer.drop("pytest-slam: the swap proxy's call broke off")
            except Exception as exc:  # as handle_error says it for a socket connection
                print(f"pytest-slam: the swap proxy dropped a call ({exc!r})", file=sys.stderr)
                answer.drop(f"pytest-slam: the swap proxy dropped the call ({exc!r})")
            finally:
                answer.finish()

        if in_place and self._in_place(method, target, body):
            limit = None if timeout is None else Deadline(time.perf_counter() + timeout, timeout)
            token = CALLER_DEADLINE.set(limit)
            try:
                job(_nothing)
            finally:
                CALLER_DEADLINE.reset(token)
            answer.timed_out = limit is not None and limit.passed
        else:
            self.workers.submit(_within(job, answer, timeout))
        return answer

    def _in_place(self, method: str, target: str, body: bytes) -> bool:
        """A plain chat call to a candidate: ``"stream"`` absent from the body means no stream;
        present, even as false, a worker serves it, which is always right."""
        path = target.partition("?")[0]
        if method != "POST" or not path.endswith(CHAT_PATH) or "/slam/ref/" in path:
            return False
        return b'"stream"' not in body

    def trusts(self, peer: tuple[str, int]) -> bool:
        """A connection from a socket another user owns is refused; an unknown owner is not."""
        uid = owner_uid(peer, self.local)
        return uid is None or self.uid is None or uid == self.uid

    def handle_error(self, request: object, client_address: object) -> None:
        """A fault in serving one connection: one line on stderr, never a thread's traceback."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            print(f"pytest-slam: the swap proxy dropped a connection ({exc!r})", file=sys.stderr)

    def start(self) -> SwapProxy:
        """Serve from a daemon thread until ``stop()``, which wakes the thread's wait at once: a
        serve loop that polls (``serve_forever``) makes every run wait for its next poll at the
        end, and wakes the thread many times a second meanwhile."""
        self._wake, self._waker = socket.socketpair()
        self._thread = threading.Thread(target=self._serve, name="slam-proxy", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        with selectors.DefaultSelector() as waiting:
            waiting.register(self, selectors.EVENT_READ)
            waiting.register(self._wake, selectors.EVENT_READ)
            while not any(key.fileobj is self._wake for key, _ in waiting.select()):
                self.handle_request()  # a connection is waiting: accepted without blocking

    def stop(self) -> None:
        if self._thread is not None:
            self._waker.send(b"\0")
            self._thread.join()
            self._thread = None
            self._wake.close()
            self._waker.close()
        self.server_close()
        self.workers.stop()
