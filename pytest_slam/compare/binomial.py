"""Exact binomial tails and Clopper-Pearson intervals, in pure Python.

The bands ``slam calibrate`` chooses are certified with an exact binomial test, and every error it
prints carries an exact interval; both need only the binomial lower tail, so no scipy.
"""

from __future__ import annotations

import math


def lower_tail(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k), summed in log space so large ``n`` neither under- nor overflows."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    log_ratio = math.log(p) - math.log1p(-p)
    log_terms = [n * math.log1p(-p)]  # log P(X = 0), then each term from the one before
    for i in range(k):
        log_terms.append(log_terms[-1] + math.log((n - i) / (i + 1)) + log_ratio)
    top = max(log_terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in log_terms))


def upper_bound(k: int, n: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on a rate seen as ``k`` of ``n``, at ``level``."""
    if n == 0:
        return 1.0
    if k >= n:
        return 1.0
    return _solve(k, n, 1 - level)


def interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper-Pearson interval for ``k`` of ``n`` (exact, conservative)."""
    if n == 0:
        return 0.0, 1.0
    tail = (1 - level) / 2
    high = 1.0 if k >= n else _solve(k, n, tail)
    low = 0.0 if k == 0 else 1 - _solve(n - k, n, tail)
    return low, high


def _solve(k: int, n: int, tail: float) -> float:
    """The p at which P(Binomial(n, p) <= k) == tail (the tail falls as p grows): bisection."""
    lo, hi = k / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if lower_tail(k, n, mid) > tail:
            lo = mid
        else:
            hi = mid
    return hi
