"""Choose a pass band and a fail band with a stated error at a stated confidence (Learn then Test).

For one scorer's scores on labelled pairs (label 1: acceptable) the pass band is ``score >=
at_least``, its error the share of unacceptable pairs in it; the fail band is ``score <
fail_below``, its error the share of acceptable pairs in it. Each band is chosen by fixed-sequence
testing over a grid fixed in advance (Angelopoulos et al., "Learn then Test", 2021): thresholds are
tested from the strictest inward, each against H0 "this band's error is above the target" with the
exact binomial p-value, and the sequence stops at the first threshold it cannot reject. Every
threshold it passed is certified: with probability at least ``1 - delta`` no certified band has an
error above its target. ``delta`` is split (Bonferroni) over both bands and every scorer tried, so
picking the scorer with the widest coverage afterwards keeps the guarantee.

The sequence starts at the first threshold whose band holds enough pairs that a band at half the
target error would be certified (and at least ``min_count``): a rule on the scores alone, so it
spends no test on the labels, and one unlucky pair among the few strictest does not end the
sequence. The price: at the defaults a pass band needs some 230 to 430 pairs (1 to 6 scorers). The
binomial test counts pairs as independent given their scores; pairs of one prompt are not, which is
why the held-out figures (``--evaluate``, the validity bench) split by prompt and ``slam
calibrate`` adds a bootstrap interval resampled by prompt (bench/README.md section 10).

A band that cannot be certified is not set. A fail band alone (long open-ended answers: low
similarity to the reference does mean a worse answer, high similarity proves nothing) calls pairs
different or undecided, never equivalent. A pass band without a fail band: ``fail_below = 0.0``,
nothing called different. Neither: no pair is decided by similarity.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_slam.compare.binomial import lower_tail

GRID = tuple(i / 100 for i in range(101))  # thresholds fixed before any label is seen


@dataclass(frozen=True)
class Targets:
    """What the bands must hold: the errors, the confidence, the smallest band."""

    max_pass_error: float = 0.05
    max_fail_error: float = 0.10
    delta: float = 0.05  # 1 - confidence, for all bands and scorers together
    min_count: int = 20

    def __post_init__(self) -> None:
        for name in ("max_pass_error", "max_fail_error", "delta"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise ValueError(
                    f"{name.replace('_', '-')} {value}: must be between 0 and 1, e.g. 0.05"
                )
        if self.min_count < 1:
            raise ValueError(f"min-count {self.min_count}: must be at least 1, e.g. 20")


@dataclass(frozen=True)
class Counts:
    """How one band split labelled pairs: called, and of those, wrong."""

    called: int
    wrong: int

    @property
    def rate(self) -> float:
        return self.wrong / self.called if self.called else math.nan


@dataclass(frozen=True)
class Choice:
    """One scorer's certified bands on the pairs it was chosen on."""

    scorer: str
    at_least: float | None
    fail_below: float | None
    pairs: int
    passed: Counts
    failed: Counts

    @property
    def decided(self) -> int:
        return self.passed.called + self.failed.called

    @property
    def coverage(self) -> float:
        return self.decided / self.pairs if self.pairs else 0.0


def band_counts(
    scores: Sequence[float], labels: Sequence[int], at_least: float | None, fail_below: float | None
) -> tuple[Counts, Counts]:
    """(pass band, fail band) counts of ``scores`` under the given bands."""
    pairs = list(zip(scores, labels, strict=True))
    inside = [y for s, y in pairs if at_least is not None and s >= at_least]
    below = [y for s, y in pairs if fail_below is not None and s < fail_below]
    return Counts(len(inside), len(inside) - sum(inside)), Counts(len(below), sum(below))


def sequence_start(alpha: float, level: float, min_count: int) -> int:
    """The fewest pairs a band needs to enter the sequence: enough that a band whose error is
    half the target would be certified, so one unlucky pair at the strict end does not end it."""
    n = max(min_count, math.ceil(math.log(level) / math.log(1 - alpha)))
    while lower_tail(math.floor(n * alpha / 2), n, alpha) > level:
        n += 1  # the exact smallest count (no step grid: 233 where 230 already meets the rule)
    return n


def certify(
    steps: Sequence[tuple[float, int, int]], alpha: float, level: float, start: int
) -> float | None:
    """Fixed-sequence test over (threshold, pairs in band, wrong in band), strictest first.

    Steps before the band holds ``start`` pairs are not in the sequence; the last threshold
    rejected before the first non-rejection is returned (None: not even the first).
    """
    chosen = None
    for threshold, n, k in steps:
        if n < start:
            continue
        if lower_tail(k, n, alpha) > level:
            break
        chosen = threshold
    return chosen


def choose_bands(
    name: str,
    scores: Sequence[float],
    labels: Sequence[int],
    targets: Targets,
    scorers_tried: int = 1,
    fail_alone: bool = True,
) -> Choice:
    """Certified bands for one scorer; ``delta`` shared with ``scorers_tried - 1`` others.

    ``fail_alone``: certify the fail band even where no pass band holds (False: only beside a
    pass band, as a module's table needs: it cannot unset the top level's pass band)."""
    level = targets.delta / (2 * scorers_tried)
    ordered = sorted(zip(scores, labels, strict=True))
    values = [s for s, _ in ordered]
    good_before = list(itertools.accumulate((y for _, y in ordered), initial=0))
    n_all, good_all = len(ordered), good_before[-1]
    pass_steps, fail_steps = [], []
    for t in GRID:
        n_below = bisect.bisect_left(values, t)
        good_below = good_before[n_below]
        fail_steps.append((t, n_below, good_below))
        n_above = n_all - n_below
        pass_steps.append((t, n_above, n_above - (good_all - good_below)))
    pass_steps.reverse()
    start = sequence_start(targets.max_pass_error, level, targets.min_count)
    at_least = certify(pass_steps, targets.max_pass_error, level, start)
    fail_below = None
    if at_least is not None or fail_alone:
        start = sequence_start(targets.max_fail_error, level, targets.min_count)
        found = certify(fail_steps, targets.max_fail_error, level, start)
        if found is not None:
            fail_below = min(found, 1.0 if at_least is None else at_least)
        elif at_least is not None:
            fail_below = 0.0  # a pass band alone: nothing called different
    passed, failed = band_counts(scores, labels, at_least, fail_below)
    return Choice(name, at_least, fail_below, n_all, passed, failed)
