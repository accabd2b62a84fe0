"""Talking to an OpenAI-compatible server: persistent HTTP connections and SSE reading.

The swap layer always streams from upstream so that it can time the first token even when the product
did not stream. The stdlib client is used on purpose: it adds microseconds per call, keeps one connection
per thread and upstream, and has no opinion about retries (the callers decide).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

_local = threading.local()
BLOCK = 65536


class UpstreamUnreachable(ConnectionError):
    """No TCP connection or no HTTP answer from the server."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    raw: http.client.HTTPResponse

    def read(self) -> bytes:
        return self.raw.read()

    def events(self) -> Iterator[bytes]:
        """The ``data:`` payloads of an SSE stream, as bytes, ending before ``[DONE]``.

        Reads what has arrived and splits the lines here: iterating the response line by line costs
        a dozen Python calls per line in http.client's chunked decoding, for every streamed token.
        """
        rest = b""
        while block := self.raw.read1(BLOCK):
            *lines, rest = (rest + block).split(b"\n")
            for line in lines:
                payload = _data(line)
                if payload == b"[DONE]":
                    # Read the end of the chunked body: a response left open makes the next request
                    # on this kept-alive connection fail after it was sent, and the retry sends it twice.
                    self.raw.read()
                    return
                if payload is not None:
                    yield payload
        payload = _data(rest)  # a last line with no newline before the body ended
        if payload is not None and payload != b"[DONE]":
            yield payload


def _data(line: bytes) -> bytes | None:
    """The payload of an SSE ``data:`` line; None for any other line (blank, comment, event name)."""
    line = line.strip()
    return line[5:].strip() if line.startswith(b"data:") else None


def split_url(base_url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname or "127.0.0.1", port, parts.path.rstrip("/")


def _connection(scheme: str, host: str, port: int, timeout: float) -> http.client.HTTPConnection:
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = {}
    key = (scheme, host, port)
    conn = pool.get(key)
    if conn is None:
        cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        conn = pool[key] = cls(host, port, timeout=timeout)
    conn.timeout = timeout
    return conn


def _drop(scheme: str, host: str, port: int) -> None:
    conn = getattr(_local, "pool", {}).pop((scheme, host, port), None)
    if conn is not None:
        conn.close()


def post(
    base_url: str, path: str, body: dict, api_key: str | None, timeout: float = 600.0
) -> Response:
    """POST JSON to ``base_url + path`` on this thread's kept-alive connection (one retry on a stale one)."""
    scheme, host, port, prefix = split_url(base_url)
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    for attempt in (0, 1):
        conn = _connection(scheme, host, port, timeout)
        try:
            conn.request("POST", prefix + path, body=data, headers=headers)
            raw = conn.getresponse()
        except (ConnectionRefusedError, socket.gaierror) as exc:
            _drop(scheme, host, port)
            raise UpstreamUnreachable(f"{type(exc).__name__}: {exc}") from exc
        except (http.client.HTTPException, OSError) as exc:
            _drop(scheme, host, port)
            if attempt == 0 and not isinstance(exc, TimeoutError):
                continue  # a kept-alive connection the server had closed
            raise UpstreamUnreachable(f"{type(exc).__name__}: {exc}") from exc
        return Response(raw.status, {k.lower(): v for k, v in raw.getheaders()}, raw)
    raise AssertionError("unreachable")


def get(base_url: str, path: str, api_key: str | None, timeout: float = 30.0) -> tuple[int, bytes]:
    scheme, host, port, prefix = split_url(base_url)
    conn = _connection(scheme, host, port, timeout)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        conn.request("GET", prefix + path, headers=headers)
        raw = conn.getresponse()
        return raw.status, raw.read()
    except (http.client.HTTPException, OSError) as exc:
        _drop(scheme, host, port)
        raise UpstreamUnreachable(f"{type(exc).__name__}: {exc}") from exc


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
