"""How many calls one candidate has in flight, and how that limit adapts to a provider's refusals.

A hosted API or a batching engine answers many requests at once; asking it one at a time wastes most
of its throughput. Each candidate gets a limit (``concurrency``): answers fetched ahead (ahead.py)
wait for a free place under it; a test's own call never waits (it is already the slowest path), but
it counts, so the limit is what the server sees. A 429 or 503 halves the limit and holds new
fetches back for the Retry-After it named (or a short backoff), as Inspect's adaptive connections
do; after a run of answered calls the limit climbs back by one, never past what was configured.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_slam.records import ModelSpec
from pytest_slam.swap.engines import needs_engine

if TYPE_CHECKING:
    from pytest_slam.swap.chat import ChatResult

ENDPOINT_CONCURRENCY = 16  # a hosted API or a server of the user's own (Inspect keeps 10)
# A managed engine: llama.cpp serving SmolLM2 on 2 cores answered 40 calls in 18.2 s at 1 slot,
# 18.2 s at 2, 15.1 s at 4 and 10.3 s at 8 (slots = calls in flight; bench/README.md section 25),
# so the embedded engine gets 8; vLLM batches hundreds.
ENGINE_CONCURRENCY = {"vllm": 64}
DEFAULT_ENGINE_CONCURRENCY = 8
THROTTLE_STATUSES = frozenset({429, 503})  # lower the limit (503: still the candidate's failure)
RATE_LIMITED = 429  # not the model's answer but the load this run made: asked again
THROTTLE_RETRIES = 8
BACKOFF_S = 1.0  # a refusal without Retry-After holds fetches back this long
MAX_HOLD_S = 30.0
RECOVER_AFTER = 8  # answered calls in a row that raise a lowered limit by one


def default_concurrency(spec: ModelSpec) -> int:
    """The limit a model gets when nobody set one (README, "Concurrency")."""
    if needs_engine(spec):
        return ENGINE_CONCURRENCY.get(spec.provider, DEFAULT_ENGINE_CONCURRENCY)
    return ENDPOINT_CONCURRENCY


def concurrency_of(spec: ModelSpec, override: int | None, run_default: int | None) -> int:
    """``--slm-concurrency``, else the model's table, else ``[tool.slam] concurrency``, else the
    model's default."""
    for value in (override, spec.concurrency, run_default):
        if value is not None:
            return value
    return default_concurrency(spec)


@dataclass
class Limiter:
    """One candidate's calls in flight (fetched and live) under its adaptive limit."""

    model: str
    ceiling: int  # the configured concurrency
    say: Callable[[str], None] | None = None  # one terminal line, the first time it lowers
    limit: int = 0
    in_flight: int = 0
    peak: int = 0
    lowered: int = 0  # how often a refusal lowered the limit
    hold_until: float = 0.0
    _answered: int = 0
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.limit = self.limit or self.ceiling

    def acquire(self, stop: threading.Event) -> int | None:
        """A place for a fetched call: waits for one under the limit and past any hold; returns
        the calls in flight with it, or None once ``stop`` is set."""
        with self._cond:
            while not stop.is_set():
                wait = self.hold_until - time.monotonic()
                if wait <= 0 and self.in_flight < self.limit:
                    return self._enter()
                self._cond.wait(timeout=min(max(wait, 0.05), 0.5))
            return None

    def enter(self) -> int:
        """A test's own call: never waits for a place; returns the calls in flight with it."""
        with self._cond:
            return self._enter()

    def held(self) -> float:
        """Seconds a refusal still holds calls back (a test's own call retried waits them)."""
        with self._cond:
            return max(0.0, self.hold_until - time.monotonic())

    def _enter(self) -> int:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        return self.in_flight

    def leave(self, status: int, hold_s: float | None = None) -> None:
        """A call ended with ``status``: a refusal lowers the limit, an answer may raise it."""
        with self._cond:
            self.in_flight -= 1
            if status in THROTTLE_STATUSES:
                self._throttle(status, hold_s)
            elif status < 400:
                self._answered += 1
                if self._answered >= RECOVER_AFTER and self.limit < self.ceiling:
                    self.limit += 1
                    self._answered = 0
            self._cond.notify_all()

    def _throttle(self, status: int, hold_s: float | None) -> None:
        """Halve the limit once per refusal spell (the calls already in flight refused together
        are one signal, not many) and hold new calls back for its Retry-After."""
        before, self._answered = self.limit, 0
        now = time.monotonic()
        hold = min(BACKOFF_S if hold_s is None else hold_s, MAX_HOLD_S)
        if now >= self.hold_until:
            self.limit = max(1, self.limit // 2)
            self.lowered += 1
        self.hold_until = max(self.hold_until, now + hold)
        if self.lowered == 1 and before != self.limit and self.say is not None:
            self.say(
                f"{self.model} answered {status}: calls in flight lowered {before} -> {self.limit}, "
                f"waiting {hold:.3g} s; the run goes on (set [tool.slam.models.{self.model}] "
                "concurrency lower to start there)"
            )

    def send(
        self,
        send: Callable[[], ChatResult],
        stop: threading.Event | None = None,
        deadline: float | None = None,
    ) -> tuple[ChatResult | None, int]:
        """One call under this limit, fetched (``stop``: waits for a place) or a test's own (no
        wait), the same way: counted in flight, and asked again after a 429 once the hold it
        set has passed (a test's own call never waits past its caller's ``deadline``, a
        perf_counter moment). Returns the result (None: stopped first) and the calls in flight
        with the try that gave it."""
        for attempt in range(THROTTLE_RETRIES + 1):
            in_flight = self.acquire(stop) if stop is not None else self.enter()
            if in_flight is None:
                return None, 0
            status, hold = 502, None
            try:
                result = send()
                status, hold = result.status, result.hold_s
            finally:
                self.leave(status, hold)
            if result.status != RATE_LIMITED or attempt == THROTTLE_RETRIES:
                return result, in_flight
            if stop is None and not self._waited(deadline):
                return result, in_flight
        raise AssertionError("unreachable")  # the loop returns on its last try

    def _waited(self, deadline: float | None) -> bool:
        """A test's own call waits out the hold, unless its caller would have given up first."""
        hold = self.held()
        if deadline is not None and time.perf_counter() + hold >= deadline:
            return False
        time.sleep(hold)
        return True

    def line(self) -> str | None:
        """The summary's line when a refusal lowered the limit during the run."""
        if not self.lowered:
            return None
        return (
            f"{self.model}: the server refused calls {self.lowered} time(s) (429/503); calls in "
            f"flight adapted from {self.ceiling} (now {self.limit}, at most {self.peak} at once)"
        )
