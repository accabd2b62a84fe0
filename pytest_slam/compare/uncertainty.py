"""How sure is a per-model figure? Paired bootstrap intervals, and "A better than B" or "cannot tell".

A mean equivalence of 0.62 against 0.60 over 40 requests says nothing on its own: whether the gap is
real depends on how much the requests vary. Every figure here is computed over *units* (a request,
keyed by its golden key, or a test), and the bootstrap resamples units, not calls. Two candidates
are compared on the units both answered, with the *same* resampled units for both (a paired
bootstrap), so the request-to-request variation they share cancels out.

Deterministic: the generator is seeded and units are taken in sorted order, so a serial run and an
xdist run print the same interval. Percentile intervals; with very few units (under ~10) they are
too narrow, which is why each result carries its ``n``. From 200 units on, the normal interval
(mean +- 1.96 standard errors) is used instead: the bootstrap agrees with it there, and costs a
second per figure in pure Python.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_slam.records import JSON

RESAMPLES = 1000
NORMAL_FROM = 200  # units; from here the normal interval replaces the (slow) bootstrap
SEED = 20240611
LEVEL = 0.95
BETTER = "better"
WORSE = "worse"
TIED = "cannot tell apart"


@dataclass
class Interval:
    """A mean over ``n`` units with its bootstrap interval at ``level``."""

    mean: float
    low: float
    high: float
    n: int
    level: float = LEVEL

    def as_dict(self) -> dict[str, float]:
        return {
            "mean": self.mean,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "level": self.level,
        }


@dataclass
class Comparison:
    """Candidate ``a`` against ``b`` on the units both answered: ``diff`` is mean(a) - mean(b)."""

    a: str
    b: str
    metric: str
    diff: Interval
    outcome: str  # BETTER (a better than b), WORSE, or TIED

    def describe(self) -> str:
        d = self.diff
        gap = f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}] over {d.n} shared"
        if self.outcome == BETTER:
            return f"{self.a} better than {self.b} on {self.metric} ({gap})"
        if self.outcome == WORSE:
            flipped = f"{-d.mean:+.3f} [{-d.high:+.3f}, {-d.low:+.3f}] over {d.n} shared"
            return f"{self.b} better than {self.a} on {self.metric} ({flipped})"
        return f"{self.a} and {self.b}: {TIED} on {self.metric} at this sample size ({gap})"

    def as_dict(self) -> dict[str, JSON]:
        return {
            "a": self.a,
            "b": self.b,
            "metric": self.metric,
            "diff": self.diff.as_dict(),
            "outcome": self.outcome,
            "text": self.describe(),
        }


def _percentiles(samples: list[float], level: float) -> tuple[float, float]:
    samples.sort()
    tail = (1 - level) / 2
    last = len(samples) - 1
    return samples[round(tail * last)], samples[round((1 - tail) * last)]


def _resampled_means(columns: list[list[float]], resamples: int, seed: int) -> list[list[float]]:
    """For each resample of the unit indices, the mean of every column over those indices."""
    n = len(columns[0])
    rng = random.Random(seed)
    units = range(n)
    out: list[list[float]] = [[] for _ in columns]
    for _ in range(resamples):
        picks = rng.choices(units, k=n)
        for col, sink in zip(columns, out, strict=True):
            sink.append(sum(map(col.__getitem__, picks)) / n)
    return out


def _normal_interval(column: list[float], mean: float, level: float) -> Interval:
    """mean +- z * standard error: what the bootstrap converges to at this many units, in O(n)."""
    from statistics import NormalDist

    n = len(column)
    var = sum((x - mean) ** 2 for x in column) / (n - 1)
    half = NormalDist().inv_cdf(0.5 + level / 2) * math.sqrt(var / n)
    return Interval(mean, mean - half, mean + half, n, level)


def mean_interval(
    values: Mapping[str, float],
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> Interval | None:
    """Mean of ``values`` (unit -> value) with a bootstrap interval; None without units."""
    keys = sorted(values)
    if not keys:
        return None
    column = [float(values[k]) for k in keys]
    mean = sum(column) / len(column)
    if len(keys) == 1:
        return Interval(mean, mean, mean, 1, level)
    if len(keys) >= NORMAL_FROM:
        return _normal_interval(column, mean, level)
    (samples,) = _resampled_means([column], resamples, seed)
    low, high = _percentiles(samples, level)
    return Interval(mean, low, high, len(keys), level)


def compare(
    a: str,
    a_values: Mapping[str, float],
    b: str,
    b_values: Mapping[str, float],
    metric: str = "equivalence",
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Comparison | None:
    """Is ``a`` better than ``b`` on the units both have? None when they share none."""
    shared = sorted(set(a_values) & set(b_values))
    if not shared:
        return None
    diffs = {k: float(a_values[k]) - float(b_values[k]) for k in shared}
    diff = mean_interval(diffs, resamples, seed)
    assert diff is not None
    if len(shared) > 1 and diff.low > 0:
        outcome = BETTER
    elif len(shared) > 1 and diff.high < 0:
        outcome = WORSE
    else:
        outcome = TIED
    return Comparison(a, b, metric, diff, outcome)


def mirrored(c: Comparison) -> Comparison:
    """The same comparison seen from ``b``: the difference negated, the outcome flipped."""
    d = c.diff
    flip = {BETTER: WORSE, WORSE: BETTER, TIED: TIED}[c.outcome]
    return Comparison(c.b, c.a, c.metric, Interval(-d.mean, -d.high, -d.low, d.n, d.level), flip)


def compare_all(
    per_model: Mapping[str, Mapping[str, float]], metric: str = "equivalence"
) -> list[Comparison]:
    """Every pair of models, in the given order, each compared on the units both answered."""
    names = list(per_model)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            result = compare(a, per_model[a], b, per_model[b], metric)
            if result is not None:
                out.append(result)
    return out


def per_unit(items: Iterable[tuple[str | None, float | None]]) -> dict[str, float]:
    """unit -> mean of its values; items with no unit or no value are left out."""
    sums: dict[str, list[float]] = {}
    for unit, value in items:
        if unit is not None and value is not None:
            sums.setdefault(str(unit), []).append(float(value))
    return {k: sum(v) / len(v) for k, v in sums.items()}
