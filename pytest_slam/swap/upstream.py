"""Talking to an OpenAI-compatible server: persistent HTTP connections and SSE reading.

The swap layer always streams from upstream so that it can time the first token even when the product
did not stream. The stdlib client is used on purpose: it adds microseconds per call, keeps one connection
per thread and upstream, and has no opinion about retries (the callers decide).

``post`` sends a JSON request with the plugin's own headers (a model's key); ``forward`` sends exactly
the headers it is given, which is how the proxy relays a caller's request without adding a key.

The connection classes are the ones ``http.client`` had when this module was imported: vcrpy (and
pytest-recording) replaces ``http.client.HTTPConnection`` while a product's cassette is active, and
the plugin's own hops (proxy to candidate, reference, judge) must never be recorded into, or replayed
from, the product's cassettes. ``urlopen`` gives urllib callers the same guarantee.
"""

from __future__ import annotations

import functools
import http.client
import json
import socket
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from pytest_slam.errors import SlamError
from pytest_slam.records import JSON, ModelSpec
from pytest_slam.util.foreign import vcr_stub_base

# A request body, completion or stream chunk: arbitrary JSON from the product or a server, read by
# key where the swap needs a field and passed along as it is otherwise.
JSONObject = dict[str, JSON]

_local = threading.local()
BLOCK = 65536
DEFAULT_TIMEOUT_S = 600.0
# No connection within this (or the call's own timeout, when shorter) is unreachable: the openai
# SDK's own connect timeout (``httpx.Timeout(600, connect=5)``), so a host that drops the SYN (a
# firewall) fails as it would without the swap, not after a model's whole ``timeout_s``.
CONNECT_TIMEOUT_S = 5.0
# Servers a thread keeps a connection to: a long-lived thread that met many (each test's own fake
# server, replicas come and gone) kept a socket to each, and a process has 1,024 files by default.
POOL_MAX = 16


def _unpatched(cls: type[http.client.HTTPConnection]) -> type[http.client.HTTPConnection]:
    """The real class, also when this module is first imported inside a vcrpy cassette (its stubs
    keep the class they stand in for: ``foreign.vcr_stub_base``)."""
    real = vcr_stub_base(cls)
    return real if issubclass(real, http.client.HTTPConnection) else cls


HTTPConnection = _unpatched(http.client.HTTPConnection)
HTTPSConnection = _unpatched(http.client.HTTPSConnection)


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(HTTPConnection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        super().__init__(context=context)
        self.context = context  # the base class keeps it privately

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(HTTPSConnection, req, context=self.context)


def urlopen(request: urllib.request.Request | str, timeout: float) -> http.client.HTTPResponse:
    """``urllib.request.urlopen`` on the unpatched connection classes (see the module's note)."""
    opener = urllib.request.build_opener(_HTTPHandler, _HTTPSHandler)
    # typeshed types ``open`` as Any; for the http(s) URLs this module is given it is an HTTPResponse.
    response: http.client.HTTPResponse = opener.open(request, timeout=timeout)
    return response


class UpstreamUnreachable(ConnectionError, SlamError, kind="upstream"):
    """No TCP connection or no HTTP answer from the server."""


class UpstreamNotSent(UpstreamUnreachable):
    """No connection (refused, no such host): not a byte of the request went out, so another
    replica of the model may take it (fleet.py)."""


class UpstreamTimeout(UpstreamUnreachable):
    """The server took the request but sent no answer within the timeout."""


class UpstreamConnectTimeout(UpstreamTimeout):
    """No connection within the timeout (a host that drops the SYN): nothing went out."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    raw: http.client.HTTPResponse
    done: bool = False  # events() saw ``[DONE]``: the stream ended as the API ends it
    pool_key: tuple[str, str, int] | None = None  # this thread's connection that carries it

    def read(self) -> bytes:
        return self.raw.read()

    def abandon(self) -> None:
        """Stop reading part-way (the caller left, or was interrupted): the connection still holds
        the rest of the answer, so it is closed, never reused for this thread's next request."""
        self.raw.close()
        if self.pool_key is not None:
            _drop(*self.pool_key)

    def events(self) -> Iterator[bytes]:
        """The ``data:`` payloads of an SSE stream, as bytes, ending before ``[DONE]``.

        Reads what has arrived and splits the lines here: iterating the response line by line costs
        a dozen Python calls per line in http.client's chunked decoding, for every streamed token.
        """
        rest = b""
        while block := self.raw.read1(BLOCK):
            *lines, rest = (rest + block).split(b"\n")
            for line in lines:
                # ``_data`` inlined: a stream is read line by line, most of them blank separators
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    self.done = True
                    # Read the end of the chunked body: a response left open makes the next request
                    # on this kept-alive connection fail after it was sent.
                    self.raw.read()
                    return
                yield payload
        last = _data(rest)  # a last line with no newline before the body ended
        self.done = last == b"[DONE]"
        if last is not None and not self.done:
            yield last


def _data(line: bytes) -> bytes | None:
    """The payload of an SSE ``data:`` line; None for any other line (blank, comment, event name)."""
    line = line.strip()
    return line[5:].strip() if line.startswith(b"data:") else None


@functools.lru_cache(maxsize=64)
def split_url(base_url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of a base URL; cached, as every call parses its target's."""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname or "127.0.0.1", port, parts.path.rstrip("/")


class Pool(dict[tuple[str, str, int], http.client.HTTPConnection]):
    """One thread's kept-alive connections; ``closed`` once ``shut_down`` ended them from another
    thread: from then on this thread sends nothing, and a request the shutdown broke is never
    taken for a stale connection and sent again (issue 49: Ctrl-C paid for it twice)."""

    closed: bool = False


def thread_pool() -> Pool:
    """This thread's kept-alive connections, for ``shut_down`` from another thread."""
    pool: Pool | None = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = Pool()
    return pool


def shut_down(pool: Pool) -> None:
    """End every request in flight on another thread's connections (answers fetched ahead when
    the run ends): its blocked read returns, and the server sees the client leave, so an engine
    stops generating an answer nobody will read. The thread sends nothing after it."""
    pool.closed = True
    for conn in list(pool.values()):
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                continue


def _connection(scheme: str, host: str, port: int, timeout: float) -> http.client.HTTPConnection:
    pool = thread_pool()
    key = (scheme, host, port)
    conn = pool.get(key)
    if conn is None:
        while len(pool) >= POOL_MAX:  # the longest kept: a server this thread left behind
            pool.pop(next(iter(pool))).close()
        cls = HTTPSConnection if scheme == "https" else HTTPConnection  # never vcrpy's stubs
        conn = pool[key] = cls(host, port, timeout=timeout)
    conn.timeout = timeout
    if conn.sock is not None:  # kept alive: its socket still has the timeout of an earlier call
        conn.sock.settimeout(timeout)
    return conn


def close_pool(pool: Pool) -> None:
    """Close a pool's connections, once the thread that used them has ended (``shut_down`` only
    ends their requests: a pool kept by its owner would hold their sockets open)."""
    pool.closed = True
    while pool:
        pool.popitem()[1].close()


def _drop(scheme: str, host: str, port: int) -> None:
    conn = getattr(_local, "pool", {}).pop((scheme, host, port), None)
    if conn is not None:
        conn.close()


def timeout_for(spec: ModelSpec) -> float:
    """A model's request timeout: its ``timeout_s`` when set, else the default."""
    return spec.timeout_s if spec.timeout_s else DEFAULT_TIMEOUT_S


JSON_HEADERS = [("Content-Type", "application/json"), ("Accept-Encoding", "identity"),
                ("Accept", "application/json, text/event-stream")]  # fmt: skip


def post(
    base_url: str,
    path: str,
    body: JSONObject,
    api_key: str | None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Response:
    """POST JSON to ``base_url + path`` on this thread's kept-alive connection (``forward``)."""
    headers = [*JSON_HEADERS, ("Authorization", f"Bearer {api_key}")] if api_key else JSON_HEADERS
    return forward(base_url, "POST", path, headers, json.dumps(body).encode(), timeout)


def forward(
    base_url: str,
    method: str,
    path: str,
    headers: list[tuple[str, str]],
    body: bytes,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Response:
    """Send ``method base_url+path`` with exactly ``headers`` (plus Host and Content-Length).

    Sent once: only the caller's own retries send a request again. The one exception is a
    kept-alive connection of this thread's pool that the server had closed while it was idle
    (``_stale``): the request never reached it, so it goes once more on a fresh connection;
    never when the run's end shut the pool down (``shut_down``), which looks the same. A fresh
    connection that breaks is never retried: the server may have the request already. A
    connection refused is ``UpstreamNotSent``: nothing went out (fleet.py sends it elsewhere).
    """
    scheme, host, port, prefix = split_url(base_url)
    if thread_pool().closed:  # the run ended this thread's requests: none is sent after that
        raise UpstreamNotSent("the run ended before this request was sent")
    host_header = host if port == (443 if scheme == "https" else 80) else f"{host}:{port}"
    for attempt in (0, 1):
        conn = _connection(scheme, host, port, timeout)
        reused = conn.sock is not None  # an open socket of an earlier request
        if not reused:
            _connect(conn, (scheme, host, port))
        try:
            conn.putrequest(method, prefix + path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", host_header)
            for name, value in headers:
                conn.putheader(name, value)
            if body or method in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)  # headers and body in one send
            raw = conn.getresponse()
        except (http.client.HTTPException, OSError) as exc:
            _drop(scheme, host, port)
            if isinstance(exc, TimeoutError):
                raise UpstreamTimeout(f"no answer within {timeout:g} s") from exc
            if attempt == 0 and reused and _stale(exc) and not thread_pool().closed:
                continue  # never a request the run's end cut: it may be at the server already
            raise UpstreamUnreachable(f"{type(exc).__name__}: {exc}") from exc
        got = {k.lower(): v for k, v in raw.getheaders()}
        return Response(raw.status, got, raw, pool_key=(scheme, host, port))
    raise AssertionError("unreachable")


def _connect(conn: http.client.HTTPConnection, key: tuple[str, str, int]) -> None:
    """Open the connection before any byte is written, so a refusal is told apart: the request
    was not sent (``UpstreamNotSent``). A connect that times out, within ``CONNECT_TIMEOUT_S`` or
    the call's own shorter timeout, stays a timeout; the answer then gets the call's timeout."""
    timeout = conn.timeout
    if timeout is None:  # http.client's "the socket default": never here, but never narrowed
        timeout = DEFAULT_TIMEOUT_S
    conn.timeout = min(timeout, CONNECT_TIMEOUT_S)
    try:
        conn.connect()
    except TimeoutError as exc:
        _drop(*key)
        raise UpstreamConnectTimeout(f"no connection within {conn.timeout:g} s") from exc
    except OSError as exc:  # refused, no such host, unreachable, a TLS handshake that failed
        _drop(*key)
        raise UpstreamNotSent(f"{type(exc).__name__}: {exc}") from exc
    finally:
        conn.timeout = timeout
    if conn.sock is not None:
        conn.sock.settimeout(timeout)


def _stale(exc: BaseException) -> bool:
    """Whether a kept-alive connection was found closed before any byte of an answer: the send
    failed, or the server closed without a status line (``RemoteDisconnected``, a reset). A status
    line that came broken (``BadStatusLine``) is an answer begun: never resent."""
    return isinstance(exc, BrokenPipeError | ConnectionResetError | ConnectionAbortedError)


def error_message(status: int, body: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else its first 200 characters."""
    try:
        err = json.loads(body).get("error")
        if isinstance(err, dict) and err.get("message"):
            return f"HTTP {status}: {err['message']}"
        if isinstance(err, str):
            return f"HTTP {status}: {err}"
    except (ValueError, AttributeError):
        pass
    return f"HTTP {status}: {body[:200].decode(errors='replace')}"
