"""The review server: 127.0.0.1, a random port, and a per-session token as the URL's first segment.

Who may use it: a request without the token, with a Host other than the loopback address it listens
on (a DNS rebinding page), or from a socket another user owns (``swap/peer.py``, as the swap proxy
checks) gets 403 before its body is read; a POST must come from the page itself (no foreign
``Origin``) and be exactly ``application/json``. Each request, head and body, must arrive within
``REQUEST_S`` of its first byte: a client trickling bytes is cut off, never holds a thread.

The token never sits in a process's argv (``/proc/*/cmdline`` is readable by every local user): the
browser is handed a launch URL, ``/launch/NONCE``, that is answered once, with a redirect to the
token's URL, and refused after (``launch_url``).

The page's Content-Security-Policy allows only its own nonce-tagged script and requests to this
server, so even a rendering bug could neither run an answer's script nor send anything elsewhere.
Stdlib only: a handful of requests per minute, and bursts of a hundred clicks at once (a listen
backlog of 1024, a thread per connection).
"""

from __future__ import annotations

import hmac
import io
import json
import os
import secrets
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import JSON
from pytest_slam.review.audits import audit_fields
from pytest_slam.review.page import render_page
from pytest_slam.review.pairs import ReviewPair
from pytest_slam.review.verdicts import (
    HumanVerdict,
    ReviewError,
    make_verdict,
    read_verdicts,
    review_path,
    save_verdicts,
)
from pytest_slam.swap.peer import owner_uid
from pytest_slam.util.files import WriteFailed

MAX_BODY = 64 * 1024
MAX_NOTE = 2000
CHOICES = ("a", "b", "tie", "both_bad")
FORBIDDEN = "forbidden: open the exact URL `slam review` printed (it holds this session's token)"
OTHER_USER = "forbidden: this review server serves only the user who started `slam review`"
CROSS_ORIGIN = "forbidden: a verdict is saved only from the review page itself"
LAUNCH_USED = "forbidden: this launch link was used already; open the URL `slam review` printed"
JSON_TYPE = "application/json"
REQUEST_S = 10.0  # one whole request, head and body, from its first byte (the page needs ms)
IDLE_S = 60.0  # a kept-alive connection with no request in this long is closed


@dataclass
class ReviewSession:
    """The pairs of one `slam review` session and the verdicts this reviewer saved."""

    store: GoldenStore
    pairs: list[ReviewPair]
    reviewer: str
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    launch: str | None = field(default_factory=lambda: secrets.token_urlsafe(24))  # once: None
    done: set[str] = field(default_factory=set)
    saved: int = 0
    # ``slam review --audit``: each verdict keeps the verdict it audited (review/audits.py)
    audit: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    # verdicts a save refused (a full disk, a read-only folder), by pair id: each later save tries
    # them again, so space that comes back mid-session saves them with no click
    unsaved: dict[str, tuple[str, HumanVerdict]] = field(default_factory=dict)
    said: set[str] = field(default_factory=set)  # each failure's line, said once on stderr

    def __post_init__(self) -> None:
        self.by_id = {p.id: p for p in self.pairs}
        seen: set[tuple[str, ...]] = set()
        for module in {p.module for p in self.pairs}:
            seen |= {v.ident for v in read_verdicts(review_path(self.store, module))}
        self.done = {
            p.id
            for p in self.pairs  # resumable: this reviewer's pairs are done
            if (p.key, p.model, p.answer_hash, self.reviewer) in seen
        }

    def launched(self, nonce: str) -> bool:
        """True the first time the launch nonce is presented, and never again."""
        with self.lock:
            ok = self.launch is not None and hmac.compare_digest(
                nonce.encode(), self.launch.encode()
            )
            if ok:
                self.launch = None
            return ok

    def page(self, nonce: str) -> str:
        with self.lock:
            todo = [p for p in self.pairs if p.id not in self.done]
            reviewed = len(self.done)
        return render_page(todo, reviewed, len(self.pairs), nonce)

    def record(self, body: dict[str, JSON]) -> dict[str, JSON]:
        """Save one verdict posted by the page: ``{"id", "choice", "note"}``."""
        pair = self.by_id.get(str(body.get("id")))
        choice, note = body.get("choice"), body.get("note") or ""
        if pair is None or choice not in CHOICES or not isinstance(note, str):
            raise ValueError(f"a verdict needs a known id, a choice in {CHOICES} and a text note")
        verdict = make_verdict(
            key=pair.key,
            model=pair.model,
            answer_hash=pair.answer_hash,
            reference_hash=pair.reference_hash,
            verdict=_candidate_view(choice, pair),
            reviewer=self.reviewer,
            note=note[:MAX_NOTE],
            **(audit_fields(pair) if self.audit else {}),
        )
        with self.lock:
            self.unsaved[pair.id] = (pair.module, verdict)
        failed = self.save_unsaved(first=pair.module)
        with self.lock:
            if pair.id in self.unsaved and pair.module in failed:
                raise failed[pair.module]  # the page says it; the pair stays to review
            return {"saved": True, "reviewed": len(self.done), "total": len(self.pairs)}

    def save_unsaved(self, first: str = "") -> dict[str, ReviewError | WriteFailed]:
        """Save every verdict not saved yet, module by module (``first`` first); returns what
        refused each module that could not be saved. A write that failed is said on stderr, in
        its one line (the file, the error, the fix), once per session."""
        with self.lock:
            todo = dict(self.unsaved)
        by_module: dict[str, list[tuple[str, HumanVerdict]]] = {}
        for pid, (module, verdict) in todo.items():
            by_module.setdefault(module, []).append((pid, verdict))
        failed: dict[str, ReviewError | WriteFailed] = {}
        for module in sorted(by_module, key=lambda m: m != first):
            items = by_module[module]
            try:
                save_verdicts(self.store, module, [v for _, v in items])
            except (ReviewError, WriteFailed) as exc:
                failed[module] = exc
                self._say(exc)
                continue
            with self.lock:
                for pid, verdict in items:
                    if self.unsaved.get(pid) == (module, verdict):  # not picked again meanwhile
                        del self.unsaved[pid]
                    self.done.add(pid)
                    self.saved += 1
        return failed

    def _say(self, exc: Exception) -> None:
        with self.lock:
            if str(exc) in self.said:
                return
            self.said.add(str(exc))
        print(f"slam review: {exc}", file=sys.stderr, flush=True)


def _candidate_view(choice: str, pair: ReviewPair) -> str:
    """ "A better" is a win when the candidate was shown as A, a loss when it was B."""
    if choice in ("tie", "both_bad"):
        return choice
    return "win" if (choice == "a") == pair.candidate_is_a else "loss"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = IDLE_S  # each read; the whole request has REQUEST_S (``_Deadline``)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the terminal shows the URL and the end summary, not a request log

    def setup(self) -> None:
        super().setup()
        owner = owner_uid(self.client_address, self.server.local)  # None: unknown (not Linux)
        self.trusted = owner is None or not hasattr(os, "getuid") or owner == os.getuid()

    def handle_one_request(self) -> None:
        """One request under its deadline, counted from its first byte (not the idle wait)."""
        try:  # the idle wait: up to IDLE_S for a first byte (rfile is buffered: it can peek)
            if not isinstance(self.rfile, io.BufferedReader) or not self.rfile.peek(1):
                self.close_connection = True  # the client closed the connection
                return
        except OSError:  # idle too long (TimeoutError), or a reset
            self.close_connection = True
            return
        self.deadline = _Deadline(self.connection, self.server.request_s)
        try:
            super().handle_one_request()
        finally:
            self.deadline.cancel()
        if self.deadline.expired:
            self.close_connection = True

    def _route(self) -> str | None:
        """The path after the token, or None (403 sent) without the token, a loopback Host or the
        same user; ``/launch/NONCE`` is answered here (once) with a redirect to the token's URL."""
        srv = self.server
        host = self.headers.get("Host", "")
        prefix, _, rest = self.path.lstrip("/").partition("/")
        if not self.trusted:
            self._send(403, OTHER_USER.encode(), "text/plain; charset=utf-8")
            return None
        if host in srv.hosts and prefix == "launch" and self.command == "GET":
            self._launch(rest.split("?", 1)[0])
            return None
        if host not in srv.hosts or not hmac.compare_digest(
            prefix.encode(), srv.session.token.encode()
        ):
            self._send(403, FORBIDDEN.encode(), "text/plain; charset=utf-8")
            return None
        return rest.split("?", 1)[0]

    def _launch(self, nonce: str) -> None:
        if not self.server.session.launched(nonce):
            self._send(403, LAUNCH_USED.encode(), "text/plain; charset=utf-8")
            return
        self._send(303, b"", "text/plain; charset=utf-8", location=f"/{self.server.session.token}/")

    def _is_for(self, route: str) -> bool:
        """True when the request is for ``route``; otherwise its 403 or 404 has been sent."""
        found = self._route()
        if found is not None and found != route:
            self._send(404, b"not found", "text/plain; charset=utf-8")
        return found == route

    def do_GET(self) -> None:
        if not self._is_for(""):
            return
        nonce = secrets.token_urlsafe(16)
        page = self.server.session.page(nonce).encode("utf-8")
        self._send(200, page, "text/html; charset=utf-8", _csp(nonce))

    def do_POST(self) -> None:
        if not self._is_for("verdict"):
            return
        origin = self.headers.get("Origin")
        if origin is not None and origin not in self.server.origins:  # another site's page
            self._json(403, {"error": CROSS_ORIGIN})
            return
        length = self.headers.get("Content-Length", "")
        if (
            not _is_json(self.headers.get("Content-Type", ""))
            or not length.isdigit()
            or int(length) > MAX_BODY
        ):
            self._json(400, {"error": f"send a JSON verdict ({JSON_TYPE}) under {MAX_BODY} bytes"})
            return
        body = self.rfile.read(int(length))
        if not self.deadline.done():
            return
        try:
            self._json(200, self.server.session.record(json.loads(body)))
        except (ValueError, AttributeError, RecursionError) as exc:  # deep nesting: refused
            self._json(400, {"error": str(exc) or "not a JSON verdict"})
        except (ReviewError, OSError) as exc:
            self._json(500, {"error": f"not saved: {exc}"})

    def _json(self, status: int, body: dict[str, JSON]) -> None:
        self._send(status, json.dumps(body).encode(), JSON_TYPE)

    def _send(
        self,
        status: int,
        body: bytes,
        ctype: str,
        csp: str | None = None,
        location: str | None = None,
    ) -> None:
        if not self.deadline.done():
            return  # cut off already: nothing more is said on this connection
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        if csp:
            self.send_header("Content-Security-Policy", csp)
        if location:
            self.send_header("Location", location)
        if status >= 400:  # a refused request's body may be unread: never parse it as the next
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


class _Deadline:
    """Cuts a connection off when its request is not all read in time: one timer per request."""

    def __init__(self, sock: socket.socket, seconds: float) -> None:
        self.sock, self.expired, self.finished = sock, False, False
        self.lock = threading.Lock()
        self.timer = threading.Timer(seconds, self._expire)
        self.timer.daemon = True
        self.timer.start()

    def done(self) -> bool:
        """The request is read: the deadline stops. False when it had expired first."""
        with self.lock:
            self.finished = True
            self.timer.cancel()
            return not self.expired

    def cancel(self) -> None:
        with self.lock:
            self.finished = True
            self.timer.cancel()

    def _expire(self) -> None:
        with self.lock:
            if self.finished:
                return
            self.expired = True
        try:  # the reading thread wakes to an ended stream; nothing more is read or answered
            self.sock.sendall(
                b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _is_json(ctype: str) -> bool:
    """Exactly ``application/json``, with at most a UTF-8 charset: not a type that merely names it
    (``text/plain; application/json`` is what a cross-site form can send without asking)."""
    media, _, params = ctype.partition(";")
    extra = params.strip().lower().replace(" ", "")
    return media.strip().lower() == JSON_TYPE and extra in ("", "charset=utf-8")


def _csp(nonce: str) -> str:
    return (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; "
        "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'"
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: socketserver's 5 reset 38 of 80 verdicts posted at once (each a click
    # that failed); a connection waits here until the accepting thread hands it a thread.
    request_queue_size = 1024

    def __init__(self, session: ReviewSession, port: int = 0, request_s: float = REQUEST_S) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.session, self.request_s = session, request_s
        self.local = ("127.0.0.1", int(self.server_address[1]))
        self.hosts = {f"127.0.0.1:{self.server_port}", f"localhost:{self.server_port}"}
        self.origins = {f"http://{host}" for host in self.hosts}

    def handle_error(self, request: object, client_address: object) -> None:
        """A connection that broke (or was cut off) ends quietly; anything else is one line."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            print(f"slam review: dropped a connection ({exc!r})", file=sys.stderr)


def serve(session: ReviewSession, port: int = 0, request_s: float = REQUEST_S) -> _Server:
    """A bound server (call ``serve_forever``); its URL is ``url(server)``. ``request_s``: the
    deadline of one whole request."""
    return _Server(session, port, request_s)


def url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_port}/{server.session.token}/"


def launch_url(server: _Server) -> str:
    """What the browser is started with: no token, and good for one visit (then 403)."""
    return f"http://127.0.0.1:{server.server_port}/launch/{server.session.launch}"
