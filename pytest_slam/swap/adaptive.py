"""Where an endpoint's calls in flight stop paying: the adaptive limit's rule, apart from the
places it governs (limits.py).

A hosted API or a batching engine answers many requests at once, but how many is its own: a vLLM
batches 32 or 256 a step, a rate-limited API refuses past 8. Asking too few wastes the server's
throughput; asking too many only queues at the server (each answer later, none sooner) or is
refused. So the limit is measured, as TCP Vegas and Netflix's concurrency-limits measure theirs:

- **Slow start.** The first places open one by one (8, then one more per answer, to 16 within the
  first round trip), so a server capped below 16 refuses one or two calls, not eight at once.
  Its answers are the first round (at the calls in flight they were sent with, 12 or so), so
  the first rise comes at 16, not a round of answers later.
- **A throughput gradient.** Past 16, the limit doubles while each rise pays in proportion (the
  throughput grew by at least half what the places added could give: a server with room, as a
  batching engine under its batch), then rises by a quarter while the server's throughput
  rises by at least ``GAIN`` from one round to the next, each round measured only on calls sent
  at that limit and only while calls were waiting for a place (a run that cannot fill its places
  says nothing about the server). The throughput of a round is Little's law over its calls: the
  calls in flight when each was sent over the seconds each took per token of its answer (per
  call where a server reports no tokens), so a mix of short and long answers, or the run's last
  stragglers, does not pass for a change of the server's pace.
  When a rise stops paying, the limit goes back to the best it measured and stays there: a
  batching engine settles at its batch, a server slowing with load where more no longer helps.
- **Refusals.** A 429 or 503 sets the limit to the calls the server was still answering (the cap
  it met, less the refused one) and remembers it: the limit never climbs past it again (the old
  rule halved, then climbed back by one per 8 answers into the same refusals, a saw tooth).

``why`` says where the limit is and why, for the run's summary. A limit set by the user
(``adaptive=False``) stays where it was set, except that refusals lower it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

START = 8  # the places opened first (slow start), up to ``INITIAL``
INITIAL = 16  # the default limit after the first round trip (Inspect keeps 10)
TOP = 64  # the most the adaptive limit reaches (a user's own setting may go to 512)
GAIN = 1.05  # a rise that raised the throughput by less than this stops the climb
STEP = 1.25  # each rise once one did not pay in proportion, at least one place more
DOUBLE = 2.0  # each rise while every rise paid in proportion (TCP's slow start goes on)
MIN_ROUND = 8  # answers a round needs, and at least the limit's worth
BUSY = 0.75  # share of a round's answers that must have found calls waiting for a place


@dataclass
class Probe:
    """One server's limit: fixed (``adaptive=False``) or found by its throughput."""

    top: int  # the most places: the user's setting, or ``TOP``
    adaptive: bool = False
    limit: int = 0
    cap: int | None = None  # the refusals' limit, remembered
    settled: bool = False
    why: str = ""
    round: int = 0  # the calls sent at this limit carry its number; earlier ones are not counted
    _count: int = 0
    _busy: int = 0
    _pace: float = 0.0  # the round's seconds per token, summed over its calls
    _flight: float = 0.0  # the calls in flight when each was sent, summed
    _best: tuple[int, float] | None = None  # (limit, throughput) of the best round
    _doubling: bool = True  # every rise so far paid in proportion to the places it added

    def __post_init__(self) -> None:
        if self.adaptive:
            self.limit = min(START, self.top)
            self.why = f"starting at {min(INITIAL, self.top)}"
        else:
            self.limit = self.top
            self.why = "as set"

    def answered(self, sent_in: int, busy: bool, pace: float, in_flight: int) -> None:
        """An answer to a call sent in round ``sent_in`` with ``in_flight`` calls in flight;
        ``busy``: calls were waiting for a place when it came; ``pace``: its seconds per token
        (per call where none are reported)."""
        if not self.adaptive or self.settled:
            return
        starting = self.limit < min(INITIAL, self.top, self.cap or self.top)
        if not starting and sent_in != self.round:
            return
        self._count += 1
        self._busy += busy
        self._pace += pace
        self._flight += in_flight
        if starting:
            self.limit += 1  # slow start: one more place per answer
            if self.limit < min(INITIAL, self._most()):
                return
            if self._count < START // 2:  # a sample sent alone restarted it: rounds from 16
                self.next_round()
                return
            self._end_round(max(START, round(self._flight / self._count)))  # its first round
        elif self._count >= max(MIN_ROUND, self.limit // 2):
            self._end_round(self.limit)

    def _end_round(self, at: int) -> None:
        """A round's answers, sent with ``at`` calls in flight, are in: rise, or settle."""
        if self._busy < BUSY * self._count or self._pace <= 0:
            self.next_round()  # the run did not fill its places: nothing learnt
            return
        rate = self._flight / self._pace  # Little: in flight / seconds per token
        best = self._best
        if best is None or rate >= best[1] * GAIN:
            # 16 -> 20 -> 25 -> 31 took a batching engine four rounds of answers of 2 to 6 s,
            # most of a 200-case run, at a mean batch of 21 of 32 (issue 49): while a rise pays
            # at least half of what its places could add, the next doubles
            if best is not None and rate < best[1] * (1 + (at / best[0] - 1) / 2):
                self._doubling = False
            self._best = (at, rate)
            step = DOUBLE if self._doubling else STEP
            raised = min(max(self.limit + 1, round(self.limit * step)), self._most())
            if raised == self.limit:
                self._settle(f"at its most ({self.limit})")
            else:
                self.why = f"rising: {rate:.3g}/s at {at}"
                self.limit = raised
        else:
            tried, self.limit = self.limit, best[0]
            self._settle(
                f"throughput stopped rising past {best[0]} "
                f"({best[1]:.3g}/s there, {rate:.3g}/s at {tried})"
            )
        self.next_round()

    def _most(self) -> int:
        return min(self.top, self.cap) if self.cap is not None else self.top

    def _settle(self, why: str) -> None:
        self.settled, self.why = True, why

    def refused(self, answering: int, status: int) -> bool:
        """A 429/503 while the server was answering ``answering`` of our calls: the limit falls
        to that (below the cap it met) and stays under it. True when it lowered the limit."""
        new = max(1, min(answering, self.limit - 1))
        if new >= self.limit:
            return False
        self.cap = new if self.cap is None else min(self.cap, new)
        self.limit = self.cap
        self._settle(f"the server refused past {self.cap} ({status})")
        self.next_round()
        return True

    def next_round(self) -> None:
        """Start a round: answers to calls sent before it are not counted (they were sent at
        another limit, or around a call sent alone)."""
        self.round += 1
        self._count = self._busy = 0
        self._pace = self._flight = 0.0
