"""The xdist progress channel's datagrams: sealed by a worker, checked by its controller first.

The controller's loopback UDP port takes datagrams from any local user, so nothing in one is read
before it is known to come from this run: a datagram is ``MAC | nonce | JSON``, the MAC an
HMAC-SHA256 of the rest under the run's secret. ``Opener.open`` checks the size (``MAX_BYTES``),
then the MAC, then that the nonce was not seen before (a replayed datagram is dropped), and only
then parses the JSON, which must be the two strings and the flag a worker sends. What it returns is
shown as ``textcodec.visible`` shows a line: a worker's text is a model's words and a test's id,
and a terminal escape in it would be obeyed by the terminal that prints it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections import deque

from pytest_slam.util.textcodec import visible

MAX_BYTES = 8192  # a progress line is short: anything longer is not one of ours
# characters of a line a worker sends, cut with "...": 12 bytes at most each as JSON escapes
# (an emoji's surrogate pair), so a sealed line always fits MAX_BYTES
MAX_TEXT = 600
_MAC = hashlib.sha256().digest_size
_NONCE = 16
_REMEMBERED = 65536  # nonces kept against replay: far more lines than a run's heartbeats


def seal(secret: str, worker: str, text: str, beat: bool = False) -> bytes:
    """One line from ``worker``, for the controller that handed out ``secret``; ``beat``: a
    heartbeat, which the controller heads with the tests done."""
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 3] + "..."
    event = {"worker": worker[:64], "text": text, "beat": beat}
    body = secrets.token_bytes(_NONCE) + json.dumps(event).encode()
    return _mac(secret, body) + body


def _mac(secret: str, body: bytes) -> bytes:
    return hmac.new(secret.encode(), body, hashlib.sha256).digest()


class Opener:
    """The controller's check of each datagram; keeps the nonces it saw."""

    def __init__(self, secret: str) -> None:
        self._secret = secret
        self._seen: set[bytes] = set()
        self._order: deque[bytes] = deque()

    def open(self, data: bytes) -> tuple[str, str, bool] | None:
        """``(worker, text, beat)``, both strings shown as text, or None for anything not a fresh line of this
        run's workers. Never raises: a datagram cannot end the listener."""
        if not _MAC + _NONCE < len(data) <= MAX_BYTES:
            return None
        mac, body = data[:_MAC], data[_MAC:]
        if not hmac.compare_digest(mac, _mac(self._secret, body)):
            return None
        nonce = body[:_NONCE]
        if nonce in self._seen:
            return None
        self._remember(nonce)
        try:
            event = json.loads(body[_NONCE:])
        except (ValueError, RecursionError):
            return None
        if not isinstance(event, dict):
            return None
        worker, text, beat = event.get("worker"), event.get("text"), event.get("beat", False)
        if not isinstance(worker, str) or not isinstance(text, str) or not isinstance(beat, bool):
            return None
        return visible(worker, line=True), visible(text, line=True), beat

    def _remember(self, nonce: bytes) -> None:
        self._seen.add(nonce)
        self._order.append(nonce)
        if len(self._order) > _REMEMBERED:
            self._seen.discard(self._order.popleft())
