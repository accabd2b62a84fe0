"""The loopback swap proxy: an OpenAI-compatible server on 127.0.0.1 that the product's SDK calls reach.

The plugin points ``OPENAI_BASE_URL`` here before test modules are imported, so clients built at import
time, with an explicit key, or lazily by ``openai.chat.completions`` all arrive here. Each request is
handed to a Router, which decides the target from the running test (or a path prefix) and records it.

Paths: ``/v1/...`` goes wherever the Router says the current test goes; ``/slam/m/NAME/v1/...`` goes to
model NAME; ``/slam/ref/v1/...`` is answered by the golden store. It never logs headers or keys.
"""

from __future__ import annotations

import functools
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from . import upstream
from .chat import ChatResult, Relay, Target

CHAT_PATH = "/chat/completions"
POLL_S = 0.05


class Router(Protocol):
    def chat(self, route: str, body: dict[str, Any], relay: Relay | None) -> ChatResult: ...

    def target(self, route: str) -> Target: ...

    def swapping(self, route: str) -> bool: ...


class RouteError(Exception):
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
            raise RouteError(404, f"pytest-slam: no route for {path}")
        route, path = head, "/v1/" + rest
    if not path.startswith("/v1/"):
        raise RouteError(404, f"pytest-slam: the swap proxy serves /v1/..., not {path}")
    return route, path[len("/v1") :]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SwapProxy

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # never log requests or headers
        pass

    def do_POST(self) -> None:
        try:
            route, path = split_route(self.path)
            body = self._body()
            if path == CHAT_PATH and self.server.router.swapping(route):
                self._chat(route, body)
            else:
                self._raw(route, path, body)
        except RouteError as exc:
            self._error(exc.status, str(exc))

    def do_GET(self) -> None:
        try:
            route, path = split_route(self.path)
            target = self.server.router.target(route)
            status, payload = upstream.get(target.base_url, path, target.api_key)
        except RouteError as exc:
            return self._error(exc.status, str(exc))
        except upstream.UpstreamUnreachable as exc:
            return self._error(502, f"pytest-slam: {target.base_url} is unreachable ({exc})")
        self._send(status, payload)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError as exc:
            raise RouteError(400, f"pytest-slam: request body is not JSON ({exc})") from exc
        if not isinstance(body, dict):
            raise RouteError(400, "pytest-slam: request body must be a JSON object")
        return body

    def _chat(self, route: str, body: dict[str, Any]) -> None:
        stream = _Stream(self) if body.get("stream") else None
        result = self.server.router.chat(route, body, stream.send if stream else None)
        if stream is not None and stream.started:
            stream.finish()
        elif result.call.error is not None and result.error_body is None:
            self._error(result.status, f"pytest-slam: {result.call.error}")
        elif result.error_body is not None:
            self._send(result.status, result.error_body)
        elif stream is not None:  # served without upstream chunks (a golden replay)
            stream.replay(result)
        else:
            self._send(200, json.dumps(result.completion).encode())

    def _raw(self, route: str, path: str, body: dict[str, Any]) -> None:
        target = self.server.router.target(route)
        try:
            resp = upstream.post(target.base_url, path, body, target.api_key)
        except upstream.UpstreamUnreachable as exc:
            return self._error(502, f"pytest-slam: {target.base_url} is unreachable ({exc})")
        ctype = resp.headers.get("content-type", "application/json")
        if resp.status == 200 and ctype.startswith("text/event-stream"):
            stream = _Stream(self)
            for payload in resp.events():
                stream.send(payload)
            return stream.finish()
        self._send(resp.status, resp.read(), {"Content-Type": ctype})

    def _send(self, status: int, payload: bytes, extra: dict[str, str] | None = None) -> None:
        headers = {"Content-Type": "application/json", **(extra or {})}
        headers["Content-Length"] = str(len(payload))
        self.wfile.write(self.head(status, headers) + payload)

    def head(self, status: int, headers: dict[str, str]) -> bytes:
        """The status line and headers, sent in one write with the body (or the first chunk).

        The caller is often a thread of this same process: headers written on their own wake it to
        parse them, and the two threads then trade the GIL once more before the body goes out.
        """
        reason = self.responses.get(status, ("",))[0]
        lines = [f"{self.protocol_version} {status} {reason}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _error(self, status: int, message: str) -> None:
        payload = json.dumps({"error": {"message": message, "type": "pytest_slam", "code": status}})
        # The SDK would retry 5xx with backoff; these errors are final, so say so.
        self._send(status, payload.encode(), {"x-should-retry": "false"})


class _Stream:
    """Server-sent events to a streaming caller; headers go out with the first chunk."""

    HEADERS = {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"}

    def __init__(self, handler: _Handler) -> None:
        self.handler = handler
        self.started = False

    def send(self, payload: bytes, end: bytes = b"") -> None:
        data = b"data: " + payload + b"\n\n"
        out = b"%x\r\n%s\r\n%s" % (len(data), data, end)
        if not self.started:
            self.started = True
            out = self.handler.head(200, self.HEADERS) + out
        self.handler.wfile.write(out)

    def finish(self) -> None:
        self.send(b"[DONE]", end=b"0\r\n\r\n")

    def replay(self, result: ChatResult) -> None:
        from .chat import stream_events

        body = result.call.request
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        for payload in stream_events(result.completion or {}, wants_usage):
            self.send(payload)
        self.finish()


class SwapProxy(ThreadingHTTPServer):
    """The proxy server; ``start()`` serves from a daemon thread until ``stop()``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, router: Router, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.router = router
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def url_for(self, route: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/slam/{route}/v1"

    def start(self) -> SwapProxy:
        # stop() waits for the serve loop's next poll: the default half second is paid by every run.
        serve = functools.partial(self.serve_forever, poll_interval=POLL_S)
        self._thread = threading.Thread(target=serve, name="slam-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
