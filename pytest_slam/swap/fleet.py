"""A model's replicas (``base_urls``): calls in turn, and a replica that dies is stepped around.

A candidate too big for one machine is served by a cluster. One behind a load balancer (vLLM with
data or tensor parallelism, Ray Serve LLM, KServe) is one endpoint; a list of replicas with no
balancer is spread here, in turn. When a replica refuses the connection (its server died, it
is restarting), no byte of the request went out (``upstream.UpstreamNotSent``), so the call goes to
the next replica, and the refusing one rests: it gets no call of its own for ``rest_s``, then is
tried again in its turn. A request that went out is never sent again: a replica that fails after
it got the request (a broken stream, a timeout, an error status) gives the call its failure, as a
single endpoint does, for a candidate never passes on calls it did not answer.

A call records the replica that took it (``Call.endpoint``); ``lines`` says what the run saw.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pytest_slam.swap.upstream import UpstreamNotSent

REST_S = 10.0  # how long a replica that refused a connection gets no call of its own
T = TypeVar("T")


@dataclass
class _Health:
    """What one replica did this run."""

    taken: int = 0  # requests it took (whatever the answer)
    refused: int = 0  # connections it refused
    first_refusal: str = ""  # what the first refusal said
    resting_until: float = 0.0  # a time.monotonic() value; 0: not resting
    back: int = 0  # times it took a request again after refusing


@dataclass
class Replicas:
    """The replicas of one model, for every call of this process (thread-safe)."""

    model: str
    urls: tuple[str, ...]
    rest_s: float = REST_S
    moved: int = 0  # calls that went to another replica because theirs refused the connection
    _turn: int = 0
    _health: dict[str, _Health] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._health = {url: _Health() for url in self.urls}

    def pick(self) -> str:
        """The next replica in turn that is not resting (when all rest: the next in turn)."""
        with self._lock:
            now, count = time.monotonic(), len(self.urls)
            order = [self.urls[(self._turn + i) % count] for i in range(count)]
            chosen = next((u for u in order if self._health[u].resting_until <= now), order[0])
            self._turn = (self.urls.index(chosen) + 1) % count
            return chosen

    def send(self, first: str, attempt: Callable[[str], T]) -> tuple[str, T]:
        """``attempt(url)`` on ``first``; while a replica refuses the connection, on the next one
        not tried yet (resting ones last). The replica that took the request, and what came back;
        ``UpstreamNotSent`` when every replica refused."""
        tried: list[str] = []
        url = first
        while True:
            tried.append(url)
            try:
                result = attempt(url)
            except UpstreamNotSent as exc:
                nxt = self._refused(url, str(exc), tried)
                if nxt is None:
                    raise UpstreamNotSent(f"every replica refused the connection ({exc})") from exc
                url = nxt
                continue
            self._took(url, moved=len(tried) > 1)
            return url, result

    def _refused(self, url: str, why: str, tried: list[str]) -> str | None:
        """``url`` rests; the replica to try next for this call, or None when none is left."""
        with self._lock:
            now = time.monotonic()
            health = self._health[url]
            health.refused += 1
            health.first_refusal = health.first_refusal or why
            health.resting_until = now + self.rest_s
            count, at = len(self.urls), self.urls.index(url)
            after = [self.urls[(at + i) % count] for i in range(1, count)]  # the turn from here
            left = [u for u in after if u not in tried]
            left.sort(key=lambda u: self._health[u].resting_until > now)  # live ones first
            if not left:
                return None
            self._turn = (self.urls.index(left[0]) + 1) % count  # it took this turn's call
            return left[0]

    def _took(self, url: str, moved: bool) -> None:
        with self._lock:
            health = self._health[url]
            health.taken += 1
            if health.resting_until:  # it had refused, and answers again
                health.back += 1
            health.resting_until = 0.0
            self.moved += moved

    def lines(self) -> list[str]:
        """What the run saw of these replicas, for the summary: nothing when none refused."""
        with self._lock:
            refusing = [(u, h) for u, h in self._health.items() if h.refused]
            if not refusing:
                return []
            taken = ", ".join(f"{u} {h.taken}" for u, h in self._health.items())
            out = []
            for url, health in refusing:
                came = (
                    f", took requests again after resting ({health.back}x)" if health.back else ""
                )
                out.append(
                    f"model {self.model!r}: replica {url} refused the connection "
                    f"{health.refused} time(s) ({health.first_refusal}){came}"
                )
            out.append(
                f"model {self.model!r}: {self.moved} call(s) went to the next replica "
                f"because theirs refused the connection (no request was sent twice; a "
                f"refusing replica gets no call for {self.rest_s:g} s); requests taken per "
                f"replica: {taken}"
            )
            return out


def send(replicas: Replicas | None, first: str, attempt: Callable[[str], T]) -> tuple[str, T]:
    """``Replicas.send``, or ``attempt(first)`` alone for a model with one endpoint."""
    if replicas is None:
        return first, attempt(first)
    return replicas.send(first, attempt)
