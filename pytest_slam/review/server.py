"""The review server: 127.0.0.1, a random port, and a per-session token as the URL's first segment.

A request without the token, or with a Host other than the loopback address it listens on (a DNS
rebinding page), gets 403 before anything is read. The page's Content-Security-Policy allows only
its own nonce-tagged script and requests to this server, so even a rendering bug could neither run
an answer's script nor send anything elsewhere. Stdlib only: a handful of requests per minute.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import JSON
from pytest_slam.review.page import render_page
from pytest_slam.review.pairs import ReviewPair
from pytest_slam.review.verdicts import (
    ReviewError,
    make_verdict,
    read_verdicts,
    review_path,
    save_verdicts,
)

MAX_BODY = 64 * 1024
MAX_NOTE = 2000
CHOICES = ("a", "b", "tie", "both_bad")
FORBIDDEN = "forbidden: open the exact URL `slam review` printed (it holds this session's token)"


@dataclass
class ReviewSession:
    """The pairs of one `slam review` session and the verdicts this reviewer saved."""

    store: GoldenStore
    pairs: list[ReviewPair]
    reviewer: str
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    done: set[str] = field(default_factory=set)
    saved: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.by_id = {p.id: p for p in self.pairs}
        seen: set[tuple[str, ...]] = set()
        for module in {p.module for p in self.pairs}:
            seen |= {v.ident for v in read_verdicts(review_path(self.store, module))}
        self.done = {p.id for p in self.pairs  # resumable: this reviewer's pairs are done
                     if (p.key, p.model, p.answer_hash, self.reviewer) in seen}  # fmt: skip

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
            key=pair.key, model=pair.model, answer_hash=pair.answer_hash,
            reference_hash=pair.reference_hash, verdict=_candidate_view(choice, pair),
            reviewer=self.reviewer, note=note[:MAX_NOTE],
        )  # fmt: skip
        save_verdicts(self.store, pair.module, [verdict])
        with self.lock:
            self.done.add(pair.id)
            self.saved += 1
            return {"saved": True, "reviewed": len(self.done), "total": len(self.pairs)}


def _candidate_view(choice: str, pair: ReviewPair) -> str:
    """ "A better" is a win when the candidate was shown as A, a loss when it was B."""
    if choice in ("tie", "both_bad"):
        return choice
    return "win" if (choice == "a") == pair.candidate_is_a else "loss"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the terminal shows the URL and the end summary, not a request log

    def _route(self) -> str | None:
        """The path after the token, or None (403 sent) without the token or a loopback Host."""
        srv = self.server
        host = self.headers.get("Host", "")
        prefix, _, rest = self.path.lstrip("/").partition("/")
        if host not in srv.hosts or not hmac.compare_digest(
            prefix.encode(), srv.session.token.encode()
        ):
            self._send(403, FORBIDDEN.encode(), "text/plain; charset=utf-8")
            return None
        return rest.split("?", 1)[0]

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
        length = self.headers.get("Content-Length", "")
        json_type = "application/json" in self.headers.get("Content-Type", "")
        if not json_type or not length.isdigit() or int(length) > MAX_BODY:
            self._json(400, {"error": f"send a JSON verdict under {MAX_BODY} bytes"})
            return
        try:
            self._json(200, self.server.session.record(json.loads(self.rfile.read(int(length)))))
        except (ValueError, AttributeError) as exc:
            self._json(400, {"error": str(exc)})
        except (ReviewError, OSError) as exc:
            self._json(500, {"error": f"not saved: {exc}"})

    def _json(self, status: int, body: dict[str, JSON]) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, body: bytes, ctype: str, csp: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        if csp:
            self.send_header("Content-Security-Policy", csp)
        if status >= 400:  # a refused request's body may be unread: never parse it as the next
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


def _csp(nonce: str) -> str:
    return (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; "
            "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'")  # fmt: skip


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, session: ReviewSession, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.session = session
        self.hosts = {f"127.0.0.1:{self.server_port}", f"localhost:{self.server_port}"}


def serve(session: ReviewSession, port: int = 0) -> _Server:
    """A bound server (call ``serve_forever``); its URL is ``url(server)``."""
    return _Server(session, port)


def url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_port}/{server.session.token}/"
