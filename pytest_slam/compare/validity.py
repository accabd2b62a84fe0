"""How well a similarity score agrees with a quality label: kappa, AUC, Spearman, false-pass rate.

A scorer is only worth gating on if its pass/fail verdict agrees with a judgement people trust (a
judge's verdict, a human's). These are the measures the validity benchmark and ``slam calibrate``
report, with bootstrap intervals resampled *by prompt* (the pairs of one prompt are not
independent). Pure Python, so the calibrate command needs no numpy.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Metric = Callable[[Sequence[float], Sequence[int], Sequence[float]], float]


def verdicts(scores: Sequence[float], threshold: float) -> list[int]:
    """1 where the score passes (``>= threshold``), else 0."""
    return [1 if s >= threshold else 0 for s in scores]


def cohen_kappa(passed: Sequence[int], labels: Sequence[int]) -> float:
    """Cohen's kappa between two binary raters: agreement beyond what chance gives."""
    n = len(labels)
    if n == 0:
        return math.nan
    observed = sum(1 for p, y in zip(passed, labels, strict=True) if p == y) / n
    p_pass, p_pos = sum(passed) / n, sum(labels) / n
    chance = p_pass * p_pos + (1 - p_pass) * (1 - p_pos)
    return 0.0 if chance >= 1.0 else (observed - chance) / (1 - chance)


def false_pass_rate(passed: Sequence[int], labels: Sequence[int]) -> float:
    """Share of the answers labelled *not* equivalent that the verdict lets pass."""
    bad = [p for p, y in zip(passed, labels, strict=True) if not y]
    return sum(bad) / len(bad) if bad else math.nan


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given their average rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """ROC AUC (Mann-Whitney): the chance a labelled-equivalent pair outscores one that is not."""
    n_pos = sum(labels)
    n_neg = len(labels) - n_pos
    if not n_pos or not n_neg:
        return math.nan
    rank_sum = sum(r for r, y in zip(ranks(scores), labels, strict=True) if y)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rho: Pearson correlation of the ranks."""
    return pearson(ranks(xs), ranks(ys))


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Pearson correlation; NaN when either side is constant."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else math.nan


def best_threshold(scores: Sequence[float], labels: Sequence[int], step: float = 0.01) -> float:
    """The threshold (on a grid of ``step``) whose verdict has the highest kappa with the labels."""
    lo, hi = min(scores), max(scores)
    grid = [lo + i * step for i in range(int((hi - lo) / step) + 2)]
    return max(grid, key=lambda t: (cohen_kappa(verdicts(scores, t), labels), -abs(t - 0.5)))


@dataclass
class Estimate:
    """A measured figure with its bootstrap 95% interval."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.2f} [{self.low:.2f}, {self.high:.2f}]"


def percentile_interval(samples: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap samples (NaNs dropped)."""
    clean = sorted(s for s in samples if not math.isnan(s))
    if not clean:
        return math.nan, math.nan
    tail = (1 - level) / 2
    lo = clean[min(len(clean) - 1, int(tail * len(clean)))]
    hi = clean[min(len(clean) - 1, int((1 - tail) * len(clean)))]
    return lo, hi


def grouped_bootstrap(
    groups: Sequence[str],
    statistic: Callable[[list[int]], float],
    resamples: int = 1000,
    seed: int = 0,
) -> Estimate:
    """``statistic(indices)`` on all rows, with an interval from resampling whole groups.

    Rows of one group (one prompt's pairs) go in or out together, so the interval reflects how
    many *prompts* were measured, not how many pairs.
    """
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    members = list(by_group.values())
    rng = random.Random(seed)
    samples = []
    for _ in range(resamples):
        picked = [i for _ in members for i in members[rng.randrange(len(members))]]
        samples.append(statistic(picked))
    lo, hi = percentile_interval(samples)
    return Estimate(statistic(list(range(len(groups)))), lo, hi)


def bootstrap_measure(
    groups: Sequence[str],
    measure: Callable[..., float],
    *columns: Sequence[float],
    resamples: int = 1000,
    seed: int = 0,
) -> Estimate:
    """``measure(*columns)`` (say ``auc(scores, labels)``) with a :func:`grouped_bootstrap` interval.

    Each resample hands ``measure`` the same rows of every column.
    """

    def statistic(ix: list[int]) -> float:
        return measure(*([column[i] for i in ix] for column in columns))

    return grouped_bootstrap(groups, statistic, resamples, seed)
